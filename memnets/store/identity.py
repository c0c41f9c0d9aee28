"""The encoder is part of the memory: which encoder filled a store, recorded with its first vector.

A store's vectors mean something only in the space of the encoder that made them: a query embedded
by another encoder (a trained pack's, the same model on another backend) is compared with them as
if they were its own, and search quietly returns the wrong memories (R@10 53.4 against 78.0 on
held-out LoCoMo for the default encoder's vectors searched with a pack's, issue 21). So every store
records an :class:`EncoderIdentity` (fingerprint, dim, and what it is for people) in the same
transaction as its first vector, and refuses to be written or searched by another encoder with an
:class:`EncoderMismatchError` that names both and the way out, :func:`memnets.reembed` /
``memnets archive reembed LOCATION --pack DIR``.

Stores that do this declare the :class:`~memnets.store.protocol.EncoderBinding` capability.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from memnets.store.errors import ArchiveFormatError

META_KEY = "encoder"  # the key of the identity in a store's meta table (JSON of EncoderIdentity)
TARGET_KEY = "reembed_target"  # the encoder a re-embedding under way moves the store to (memnets.store.reembed)


class EncoderMismatchError(ArchiveFormatError):
    """The store was filled by another encoder than the one it is opened with (or re-embedded to)."""


@dataclass(frozen=True)
class EncoderIdentity:
    """Which encoder filled a store: its ``fingerprint`` (weights, configuration, dim and variant),
    ``dim``, and ``source``, a description for people ("bundled all-MiniLM-L6-v2", a folder)."""

    fingerprint: str
    dim: int
    source: str = "unknown"

    @classmethod
    def of(cls, encoder) -> EncoderIdentity:
        """The identity of a :class:`~memnets.protocols.TextEncoder` (it must have a ``fingerprint``)."""
        fingerprint = getattr(encoder, "fingerprint", None)
        if not isinstance(fingerprint, str) or not fingerprint:
            raise TypeError(
                f"encoder {type(encoder).__name__} has no fingerprint (a non-empty str attribute naming its "
                "weights and configuration, see memnets.protocols.TextEncoder); a store records it to refuse "
                f"vectors of another encoder, got {fingerprint!r}"
            )
        return cls(fingerprint, int(encoder.dim), str(getattr(encoder, "source", type(encoder).__name__)))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> EncoderIdentity:
        try:
            data = json.loads(text)
            return cls(str(data["fingerprint"]), int(data["dim"]), str(data.get("source", "unknown")))
        except (ValueError, KeyError, TypeError) as error:
            raise ArchiveFormatError(f"{where}: the recorded encoder identity is unreadable ({error})") from None

    def describe(self) -> str:
        return f"{self.fingerprint} ({self.source}, dim {self.dim})"


def check_identity(stored: EncoderIdentity | None, given: EncoderIdentity, where: str) -> None:
    """Raise :class:`EncoderMismatchError` unless the store is empty of vectors (``stored`` None) or
    was filled by the ``given`` encoder; the message names both and the way out."""
    if stored is None or stored.fingerprint == given.fingerprint:
        return
    raise EncoderMismatchError(
        f"{where} was filled by encoder {stored.describe()}, but is opened with encoder {given.describe()}: "
        "their vectors live in different spaces, so a search would compare a query of one with memories of "
        f"the other and return the wrong memories. Re-embed every memory with the new encoder: "
        f"`memnets archive reembed {where} --pack DIR` (or --encoder DIR), or from Python "
        f"`memnets.reembed({where!r}, pack=DIR)`; or open it with the encoder that filled it."
    )


def bind_encoder(store, encoder) -> EncoderIdentity:
    """The encoder's identity, bound to ``store`` when the store records identities (the
    :class:`~memnets.store.protocol.EncoderBinding` capability): EncoderMismatchError if another
    encoder filled it. What AgentMemory and MemoryManager call before they read or write."""
    from memnets.store.protocol import EncoderBinding, supports

    identity = EncoderIdentity.of(encoder)
    if supports(store, EncoderBinding):
        store.bind_encoder(identity)
    return identity
