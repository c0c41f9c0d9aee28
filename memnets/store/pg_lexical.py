"""The PostgreSQL store's lexical index and ranking: full-text lexemes in the row, BM25 over the owner's rows.

Hybrid search (:mod:`memnets.memory.hybrid`) fuses this ranking with the dense one. The index is
built so that it can neither drift from the rows nor outlive them:

- ``lexemes`` is a generated column of the memories table (``to_tsvector('english', content)`` of a
  current row, NULL for an older version), computed by PostgreSQL in every write of the row, so no
  code path can leave it out of step; it goes with its row, and the store's scrub after a deletion
  (``VACUUM FULL`` by default) rewrites the table and its indexes without it. The content is read
  from the unsealed payload's JSON by ``{table}_content(payload)``, a function of the store (declared
  immutable, which a generated column needs: ``convert_from`` of a fixed encoding is).
- A GIN index over the lexemes of current rows (``tsvector_to_array``) finds the rows holding a word.
- Only a store without a key has them: with a key the payload is sealed, and lexemes of its plain
  text would hold what the key protects. A store of format 5 gains them on its first open by this
  memnets (:mod:`memnets.store.pg_schema`), computed for every row it holds.

Ranking: Okapi BM25 (k1 1.2, b 0.75, FTS5's constants and IDF, so both stores rank alike) over the
owner's current, unexpired rows that pass the filter's clear columns: a term's document frequency
and the row count are the owner's, the length of a row is its number of distinct lexemes, and the
mean length is that of the rows holding a query word. The query's words are its lexemes under the
same configuration (English stemming and stop words), any of them.

The lexemes' schema and the ranking's statement are built by :mod:`memnets.store.queries_postgres`; the
engine's ``lexical`` (:class:`memnets.store.pg_search.PgEngine`) runs it. This module holds no code: it is
where the design of the index is written down.
"""
