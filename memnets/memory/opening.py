"""From ``memnets.open``'s arguments to the parts of a memory: components, settings and the store.

``memnets.open(location, pack=..., encoder=..., **options)`` routes its options here: the
:class:`~memnets.memory.config.ManagerConfig` fields become the memory's settings (a pack's
thresholds fill those not given), the rest go to the store; the pack (or encoder) gives the encoder
and the decisions. ``memnets.reembed`` and ``MemoryManager.open`` / ``from_pretrained`` load their
components by the same rule (:func:`memory_components`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import fields
from typing import NamedTuple

from memnets.memory.config import ManagerConfig
from memnets.memory.signals import pack_components
from memnets.protocols import TextEncoder
from memnets.store import StoreFormatError, open_store, store_class, store_options


class MemoryParts(NamedTuple):
    """What an ``AgentMemory`` is built from: an open store, its encoder, the settings and the decisions."""

    store: object
    encoder: object
    config: ManagerConfig
    components: dict  # importance, gate, scorer: what a pack supplies


def memory_components(pack=None, encoder=None, *, backend: str | None = None, where: str = "memnets.open") -> dict:
    """What a memory or a manager is built from: :func:`~memnets.memory.signals.pack_components` of
    ``pack`` (a folder or a loaded Pack), else ``{"encoder": ...}`` of ``encoder`` (an object, an
    encoder folder, or None: the bundled all-MiniLM-L6-v2), folders loaded with ``backend``
    (:func:`memnets.nn.loading.load_encoder`; None: torch where installed, else ONNX Runtime; a pack's
    encoder likewise, :func:`pack_from`).

    ``where`` names the caller in the error for both given.
    """
    if pack is not None:
        if encoder is not None:
            raise ValueError(
                f"{where}: give pack or encoder, not both (the pack's heads and scorer were fitted to its encoder)"
            )
        if isinstance(pack, (str, os.PathLike)):
            pack = pack_from(pack, backend)
        return pack_components(pack)
    if encoder is None or isinstance(encoder, (str, os.PathLike)):
        from memnets.nn.loading import load_encoder

        encoder = load_encoder(encoder, backend)
    return {"encoder": encoder}


def pack_from(folder, backend: str | None):
    """The pack in ``folder``, its encoder on ``backend`` (None: torch where installed, else ONNX Runtime, as an
    encoder folder's): :func:`memnets.pack.load_pack`, which serves a BERT pack without torch."""
    from memnets.pack import load_pack

    return load_pack(folder, backend=backend)


def supersession_judge(given, from_pack):
    """``memnets.open``'s ``supersession``: "auto" is the pack's change judge when it has one, else the one
    shipped with memnets (:func:`memnets.nn.loading.load_default_judge`, on ONNX Runtime); None turns the step off; a judge is kept."""
    if isinstance(given, str):
        if given != "auto":
            raise ValueError(f'supersession: expected "auto", None or a SupersessionJudge, got {given!r}')
        if from_pack is not None:
            return from_pack
        from memnets.nn.loading import load_default_judge

        return load_default_judge()
    return given


def open_parts(location, *, pack, key, encoder, backend: str | None, options: dict, supersession=None) -> MemoryParts:
    """The parts of ``memnets.open(location, ...)``: ``options`` split into settings and store options."""
    names = {f.name for f in fields(ManagerConfig)}
    settings = {name: value for name, value in options.items() if name in names}
    store_options = {name: value for name, value in options.items() if name not in names}
    check_options(location, store_options, "memnets.open", names)
    if isinstance(pack, (str, os.PathLike)) and encoder is None:  # loaded once: heads and "auto"'s judge
        pack = pack_from(pack, backend)
    components = memory_components(pack, encoder, backend=backend)
    from_pack = pack.supersession if pack is not None and supersession == "auto" else None
    components["supersession"] = supersession_judge(supersession, from_pack)
    encoder = components.pop("encoder")
    for name in names & set(components):  # thresholds the pack chose (write-through, duplicate), unless given
        settings.setdefault(name, components.pop(name))
    config = ManagerConfig.build(**settings)
    return MemoryParts(open_for(location, encoder, key, store_options), encoder, config, components)


def reembed(
    location: str | os.PathLike,
    *,
    pack=None,
    encoder: TextEncoder | str | os.PathLike | None = None,
    key: bytes | str | None = None,
    batch_size: int = 64,
    progress: bool | None = None,
    **options,
):
    """Move the store at ``location`` to a new encoder: re-embed every memory of every user with the
    encoder of ``pack`` (or ``encoder``, or the bundled one), then swap in one transaction.

    Resumable (a killed run carries on where it stopped), answering from the old vectors until the
    swap, and on PostgreSQL shareable by several workers at once; see :mod:`memnets.store.reembed`.
    ``options`` go to the store. Returns a :class:`~memnets.store.reembed.ReembedReport`.

    Example::

        memnets.reembed("memories/", pack="checkpoints/pack")
        memory = memnets.open("memories/", pack="checkpoints/pack")  # now accepted
    """
    from memnets.store.reembed import reembed as run

    check_options(location, options, "memnets.reembed")

    with open_store(location, None, key=key, **options) as store:  # a location without a store: refused first
        new = memory_components(pack, encoder, where="memnets.reembed")["encoder"]
        return run(store, new, batch_size=batch_size, progress=progress)


def check_options(location, options: Mapping, call: str, settings: Collection[str] = ()) -> None:
    """TypeError naming ``call`` and each option that neither the store at ``location`` nor ``settings`` (the
    :class:`ManagerConfig` fields) takes, before anything is loaded: not the store class's own TypeError."""
    store = store_class(location)
    unknown = sorted(set(options) - store_options(location))
    if unknown:
        takes = ", ".join(sorted({*settings, *store_options(location)}))
        raise TypeError(
            f"{call}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; besides its own "
            f"arguments it takes these options (ManagerConfig fields and {store.__name__}'s): {takes}"
        )


def open_for(location, encoder, key, options: dict):
    """The store at ``location`` opened for ``encoder``'s dim; one that holds vectors of another dim is
    opened as it is, so that the encoder identity check names the encoder that filled it."""
    try:
        return open_store(location, encoder.dim, key=key, **options)
    except StoreFormatError as error:
        try:
            store = open_store(location, None, key=key, **options)
        except Exception:
            raise error from None
        if store.dim == encoder.dim:  # the format error was about something else
            store.close()
            raise
        return store


__all__ = ["MemoryParts", "memory_components", "open_for", "open_parts", "pack_from", "reembed"]
