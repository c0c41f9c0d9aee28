"""How `memnets memories` opens its LOCATION: an existing store only, and an encoder only to embed.

A command that reads or deletes (``users``, ``list``, ``show``, ``history``, ``delete``,
``export``) never encodes a text, so it does not load one: the store's recorded encoder identity
stands in for the encoder (:class:`RecordedEncoder`), which keeps torch and transformers out of
the process and the command under a second and a half. ``search`` and ``import`` embed, so they
load the encoder (``--pack``/``--encoder``, else the bundled one) as ``memnets.open`` does.

A LOCATION that holds no store is refused (:class:`~memnets.store.errors.StoreNotFoundError`,
nothing created), so a mistyped folder is an error rather than a new empty memory; only ``import
--create`` makes a store.
"""

from __future__ import annotations


class RecordedEncoder:
    """The identity of the encoder that filled a store (its fingerprint, dim and source), standing in
    for that encoder in a command that does not embed; ``encode`` is never reached there."""

    def __init__(self, identity) -> None:
        self.fingerprint = identity.fingerprint
        self.dim = identity.dim
        self.source = identity.source

    def encode(self, texts, kind: str = "memory"):
        raise RuntimeError(f"RecordedEncoder of {self.source} cannot embed: open the memory with its encoder")


def open_memory(location, *, key, encoder, pack, options: dict, embeds: bool, create: bool):
    """The AgentMemory at ``location``; StoreNotFoundError where none is and ``create`` is False.

    Without ``embeds`` and without an encoder or pack named, the memory runs on the store's recorded
    encoder identity; a store that recorded none (no vector yet, or filled before identities were
    recorded) is opened with the default encoder as ``memnets.open`` would.
    """
    if not create:
        from memnets.store import open_store

        store = open_store(location, None, key=key, **options)  # dim None: only an existing store opens
        identity = store.encoder_identity()
        if not embeds and encoder is None and pack is None and identity is not None:
            from memnets.api import AgentMemory

            try:
                return AgentMemory(store, RecordedEncoder(identity), owns_store=True)
            except BaseException:
                store.close()
                raise
        store.close()
    import memnets

    return memnets.open(location, key=key, encoder=encoder, pack=pack, **options)
