"""The lexical ranking of a store, beside its dense one: a part of the store core.

``lexical_search`` (:meth:`~memnets.store.core.SqlStore.lexical_search`) ranks an owner's current memories by the words of a query (the
embedded archive: SQLite FTS5's ``bm25()``, :mod:`memnets.store.sqlite_lexical`; PostgreSQL: BM25
over the owner's rows from full-text lexemes, :mod:`memnets.store.pg_search`), under the contract
of ``search``: owner-scoped, filters applied before ranking, current and unexpired rows only. Hybrid
search (:mod:`memnets.memory.hybrid`) fuses it with the dense ranking.

A store has a lexical index only when its text is not sealed (no ``key``): an index of plain terms
would hold what the key protects. ``supports_lexical_search`` says so per store (set when it opens);
the engine's ``lexical`` (:mod:`memnets.store.engine`) ranks after the checks here (:func:`check_lexical`).
"""

from __future__ import annotations

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.store import rows as rowcodec
from memnets.store.errors import StoreError
from memnets.store.filters import MemoryFilter

# BM25's constants: those of SQLite FTS5's bm25(), which the embedded archive ranks with (fixed there), so
# that the PostgreSQL store's BM25 ranks alike
K1, B = 1.2, 0.75


def check_lexical(store, text: str, k: int, owner: str, filters) -> tuple[int, MemoryFilter | None]:
    """The checked ``k`` and ``filters`` of a ``lexical_search`` on ``store`` (see the module docstring for what
    is refused: a text that is no string, as-of filters, a store without a lexical index)."""
    where = f"{store._name}.lexical_search"
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
    if not store.supports_lexical_search:
        raise StoreError(
            f"{where}: {store._where()} keeps no lexical index"
            + (" (its text is encrypted: an index of its words would hold them in clear)" if store._cipher else "")
        )
    return k, filters
