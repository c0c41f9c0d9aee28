"""The lexical ranking of a store, beside its dense one: a part of the store core.

:meth:`LexicalRanking.lexical_search` ranks an owner's current memories by the words of a query (the
embedded archive: SQLite FTS5's ``bm25()``, :mod:`memnets.store.sqlite_lexical`; PostgreSQL: BM25
over the owner's rows from full-text lexemes, :mod:`memnets.store.pg_lexical`), under the contract
of ``search``: owner-scoped, filters applied before ranking, current and unexpired rows only. Hybrid
search (:mod:`memnets.memory.hybrid`) fuses it with the dense ranking.

A store has a lexical index only when its text is not sealed (no ``key``): an index of plain terms
would hold what the key protects. ``supports_lexical_search`` says so per store (set when it opens);
the engine gives ``_lexical(text, k, owner, filters)`` after the checks here.
"""

from __future__ import annotations

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.records import Memory
from memnets.store import rows as rowcodec
from memnets.store.errors import StoreError
from memnets.store.filters import MemoryFilter

# BM25's constants: those of SQLite FTS5's bm25(), which the embedded archive ranks with (fixed there), so
# that the PostgreSQL store's BM25 ranks alike
K1, B = 1.2, 0.75


class LexicalRanking:
    """:meth:`lexical_search` over the engine's ``_lexical`` (see the module docstring)."""

    supports_lexical_search = False  # True on a store that opened with its lexical index

    def lexical_search(
        self, text: str, k: int, owner: str, *, filters: MemoryFilter | None = None
    ) -> list[tuple[Memory, float]]:
        """The owner's k current memories passing ``filters`` that hold a word of ``text``, best first by the
        store's lexical score (higher is better); fewer when fewer hold one. Filters apply before ranking,
        as in ``search``; as-of filters (``as_of``, ``known_at``) are refused: the index holds current rows only.
        StoreError where the store keeps no lexical index (an encrypted store)."""
        where = f"{self._name}.lexical_search"
        if not isinstance(text, str):
            raise ArgumentTypeError(f"{where}: text must be a string, got {type(text).__name__}", field="text")
        rowcodec.check_owner(owner, where)
        k = rowcodec.check_k(k, where)
        filters = MemoryFilter.parse(filters)
        if filters is not None and filters.time_travel:
            raise ArgumentValueError(
                f"{where}: filters with as_of or known_at rank older versions, which the lexical index does not hold",
                field="filters",
            )
        if not self.supports_lexical_search:
            raise StoreError(
                f"{where}: {self._where()} keeps no lexical index"
                + (" (its text is encrypted: an index of its words would hold them in clear)" if self._cipher else "")
            )
        return [(hit.memory, hit.score) for hit in self._lexical(text, k, owner, filters)]
