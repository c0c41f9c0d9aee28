"""The PostgreSQL store's statements, built as ``(sql, params)``: the query builder of pgvector.

:class:`PgQueries` adds to the shared statements (:class:`~memnets.store.queries.SqlQueries`) those
only the PostgreSQL store runs: its rankings with pgvector (:mod:`memnets.store.pg_search`: through
the HNSW index, exact, streamed), its BM25 ranking (:mod:`memnets.store.pg_search`), the table lock
a search holds, its maintenance (VACUUM, ANALYZE) and its re-embedding claims (``FOR UPDATE SKIP LOCKED``). Table names carry the store's prefix
(:class:`~memnets.store.pg_dialect.PgDialect`).
"""

from __future__ import annotations

import numpy as np

from memnets.store.core_lexical import K1, B
from memnets.store.pg_dialect import PgDialect
from memnets.store.queries import SqlQueries, Statement

CONFIG = "english"  # the text search configuration of the lexemes and of the query (memnets.store.pg_search)

# SET LOCAL of both HNSW settings in one statement (its parameter: ef_search)
_HNSW_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true)"
)

# one row written: inserted, or over the stored (owner, id)
_UPSERT = (
    "INSERT INTO {memories} (owner, id, t, last_access, importance, kind, superseded_by, payload, embedding, "
    "version, expires_at, ttl, chunks) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (owner, id) DO UPDATE SET "
    "t = excluded.t, last_access = excluded.last_access, importance = excluded.importance, kind = excluded.kind, "
    "superseded_by = excluded.superseded_by, payload = excluded.payload, embedding = excluded.embedding, "
    "version = excluded.version, expires_at = excluded.expires_at, ttl = excluded.ttl, chunks = excluded.chunks"
)


# The schema (memnets.store.pg_schema). Statements name tables and indexes by {memories}, {meta}, ... (the
# dialect's names). A re-embedding's new vectors (memnets.store.reembed), one per row at the version it was
# embedded from; they go with their row (ON DELETE CASCADE). The encoder that filled the store is the meta key "encoder".
_REEMBED = """CREATE TABLE IF NOT EXISTS {reembed} (
        owner text NOT NULL,
        id text NOT NULL,
        version integer NOT NULL,
        embedding vector NOT NULL,
        chunks bytea,
        PRIMARY KEY (owner, id),
        FOREIGN KEY (owner, id) REFERENCES {memories} (owner, id) ON DELETE CASCADE
    )"""
# format N -> statements taking it to N + 1 (memnets.store.pg_schema: its further steps)
_MIGRATIONS: dict[int, list[str]] = {
    1: ["ALTER TABLE {memories} ADD COLUMN version integer NOT NULL DEFAULT 1"],  # + _bind_rows (store id)
    2: [  # expiry (TTL); + _tag_ledger (the deletion ledger names owners and ids by keyed hashes)
        "ALTER TABLE {memories} ADD COLUMN expires_at timestamptz",
        "ALTER TABLE {memories} ADD COLUMN ttl double precision",
        "CREATE INDEX {expires} ON {memories} (owner, expires_at) WHERE expires_at IS NOT NULL",
    ],
    3: [_REEMBED],
    4: [  # long memories: the vectors of their further windows (memnets.store.chunks), also while re-embedding
        "ALTER TABLE {memories} ADD COLUMN chunks bytea",
        "ALTER TABLE {reembed} ADD COLUMN IF NOT EXISTS chunks bytea",
        "CREATE INDEX {chunked} ON {memories} (owner) WHERE chunks IS NOT NULL",
    ],
    5: [],  # + the lexemes of a store without a key (lexical_schema), computed for the rows it holds
}
_HNSW = """CREATE INDEX {hnsw} ON {memories} USING hnsw (embedding vector_ip_ops)
    WITH (m = {m}, ef_construction = {ef_construction}) WHERE superseded_by IS NULL"""
_SCHEMA = [
    """CREATE TABLE {meta} (key text PRIMARY KEY, value bytea NOT NULL)""",
    """CREATE TABLE {memories} (
        seq bigint GENERATED ALWAYS AS IDENTITY,   -- write order: history lists versions by it
        owner text NOT NULL,
        id text NOT NULL,
        t timestamptz NOT NULL,
        last_access timestamptz NOT NULL,
        importance double precision NOT NULL,
        kind text NOT NULL,
        superseded_by text,                        -- id of the newer version (NULL: current)
        version integer NOT NULL DEFAULT 1,        -- +1 on every write of the row, bound into the seal
        payload bytea NOT NULL,                    -- JSON of content and fields, AES-GCM sealed with a key
        embedding vector({dim}) NOT NULL,
        expires_at timestamptz,                    -- NULL: never expires (not sealed, like last_access)
        ttl double precision,                      -- seconds a refresh on read gives the row again
        chunks bytea,                              -- float32 [m, dim]: a long memory's further windows
        PRIMARY KEY (owner, id)
    )""",
    """CREATE INDEX {expires} ON {memories} (owner, expires_at) WHERE expires_at IS NOT NULL""",
    """CREATE INDEX {owner_t} ON {memories} (owner, t, id) WHERE superseded_by IS NULL""",
    """CREATE INDEX {owner_kind} ON {memories} (owner, kind) WHERE superseded_by IS NULL""",
    """CREATE INDEX {versions} ON {memories} (owner, superseded_by) WHERE superseded_by IS NOT NULL""",
    """CREATE INDEX {chunked} ON {memories} (owner) WHERE chunks IS NOT NULL""",
    _HNSW,
    _REEMBED,
]
# the lexemes of a store without a key (memnets.store.pg_search), at creation or the format-6 upgrade
_LEXICAL_SCHEMA = [
    """CREATE FUNCTION {content}(payload bytea) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT convert_from(payload, 'UTF8')::jsonb ->> 'content' $$""",
    f"""ALTER TABLE {{memories}} ADD COLUMN lexemes tsvector GENERATED ALWAYS AS
        (CASE WHEN superseded_by IS NULL THEN to_tsvector('{CONFIG}', {{content}}(payload)) END) STORED""",
    """CREATE INDEX {lexical} ON {memories} USING gin (tsvector_to_array(lexemes)) WHERE superseded_by IS NULL""",
]


class PgQueries(SqlQueries):
    """The PostgreSQL store's statements over its :class:`~memnets.store.pg_dialect.PgDialect`."""

    d: PgDialect
    for_update = " FOR UPDATE"

    def upsert(self) -> str:
        return _UPSERT.format(memories=self.d.memories)

    def deletions_table(self) -> Statement:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.d.deletions} (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "owner text, id text, before timestamptz)",
            [],
        )

    def deletions_exist(self) -> Statement:
        return "SELECT to_regclass(%s)", [f"{self.d.table}_deletions"]

    def lock(self, purpose: str) -> Statement:
        return "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"memnets-{purpose}-{self.d.table}"]

    def swap_lock(self) -> Statement:
        return f"LOCK TABLE {self.d.memories} IN SHARE ROW EXCLUSIVE MODE", []  # writers wait for the swap

    def begin(self) -> Statement:
        return "BEGIN", []

    def commit(self) -> Statement:
        return "COMMIT", []

    # ------------------------------------------------------------------ search
    def share_lock(self) -> Statement:
        """The table's ACCESS SHARE lock a search holds (a swap to another dim waits for it)."""
        return f"LOCK TABLE {self.d.memories} IN ACCESS SHARE MODE", []

    def hnsw_settings(self, ef_search: int) -> Statement:
        """The HNSW settings of this transaction: iterative scan, ``ef_search``."""
        return _HNSW_SETTINGS, [str(int(ef_search))]

    def index_ranking(self, query: np.ndarray, where: str, params: list, k: int) -> Statement:
        """The k nearest rows matching ``where`` through the HNSW index (the iterative scan's rows, re-sorted
        exactly): each record's columns, then its distance."""
        d = self.d
        return (
            f"WITH hits AS MATERIALIZED (SELECT {d.select()}, embedding <#> %s AS distance FROM {d.memories} "
            f"WHERE {where} ORDER BY distance LIMIT %s) SELECT * FROM hits ORDER BY distance",
            [query, *params, k],
        )

    def matching_up_to(self, where: str, params: list, most: int) -> Statement:
        """How many rows match ``where``, counted up to ``most``."""
        return f"SELECT count(*) FROM (SELECT 1 FROM {self.d.memories} WHERE {where} LIMIT %s) AS matching", [
            *params,
            most,
        ]

    def exact_ranking(self, query: np.ndarray, where: str, params: list, k: int | None = None) -> Statement:
        """The rows matching ``where`` ranked exactly, not through the index (``+ 0`` keeps the planner off
        it), the first ``k`` (None: all, to stream): each record's columns, then its distance."""
        d = self.d
        ranked = (
            f"SELECT {d.select()}, embedding <#> %s AS distance FROM {d.memories} "
            f"WHERE {where} ORDER BY (embedding <#> %s) + 0"
        )
        if k is None:
            return ranked, [query, *params, query]
        return f"{ranked} LIMIT %s", [query, *params, query, k]

    def first(self, ranked: Statement, k: int) -> Statement:
        """The first ``k`` records of the statement ``ranked`` (one without a LIMIT)."""
        sql, params = ranked
        return f"{sql} LIMIT %s", [*params, k]

    def lexical(self, text: str, owner: str, where: str, params: list) -> Statement:
        """The owner's records matching ``where`` that hold a lexeme of ``text``, best first by BM25
        (:mod:`memnets.store.pg_search`), with no LIMIT: each record's columns, then its score negated."""
        d = self.d
        return (
            f"SELECT {d.select('m')}, -r.score FROM ({_bm25(d.memories, where)}) r "
            f"JOIN {d.memories} m ON m.owner = %s AND m.id = r.id ORDER BY r.score DESC, r.id{d.binary_order}",
            [text, *params, *params, owner],
        )

    # ------------------------------------------------------------------ maintenance
    def vacuum(self, full: bool) -> Statement:
        """VACUUM the table (``full``: rewrite it)."""
        return f"VACUUM FULL {self.d.memories}" if full else f"VACUUM {self.d.memories}", []

    def analyze(self) -> Statement:
        return f"ANALYZE {self.d.memories}", []

    def maintenance_memory(self, amount: str) -> Statement:
        """This transaction's maintenance_work_mem (``amount``: a checked size such as '512MB')."""
        return f"SET LOCAL maintenance_work_mem = '{amount}'", []

    def drop_hnsw(self) -> Statement:
        return f"DROP INDEX IF EXISTS {self.d.names['hnsw']}", []

    def resize_embedding(self, dim: int) -> list[Statement]:
        """Replace the vector column by an empty one of ``dim`` (its index dropped first)."""
        d = self.d
        return [
            self.drop_hnsw(),
            (f"ALTER TABLE {d.memories} DROP COLUMN embedding", []),
            (f"ALTER TABLE {d.memories} ADD COLUMN embedding vector({int(dim)})", []),
        ]

    def embedding_required(self) -> Statement:
        """The vector column made NOT NULL again, once a resize filled it."""
        return f"ALTER TABLE {self.d.memories} ALTER COLUMN embedding SET NOT NULL", []

    # ------------------------------------------------------------------ re-embedding
    def claim_todo(self, size: int) -> Statement:
        """Lock up to ``size`` records without a re-embedded vector at their version, skipping locked ones."""
        d = self.d
        return f"SELECT {d.select('m')} {self.todo()} ORDER BY m.owner, m.id LIMIT %s FOR UPDATE OF m SKIP LOCKED", [
            size
        ]

    def reembedded_versions(self, owners: list[str], ids: list[str]) -> Statement:
        """(owner, id, version) of the re-embedded vectors of these owners and ids."""
        return f"SELECT owner, id, version FROM {self.d.reembed} WHERE owner = ANY(%s) AND id = ANY(%s)", [owners, ids]

    def save_reembedded(self) -> str:
        """One re-embedded vector (run for many: owner, id, version, vector, chunks each)."""
        return (
            f"INSERT INTO {self.d.reembed} (owner, id, version, embedding, chunks) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (owner, id) DO UPDATE SET version = excluded.version, "
            "embedding = excluded.embedding, chunks = excluded.chunks"
        )

    # ------------------------------------------------------------------ the schema (memnets.store.pg_schema)
    def schema(self, dim: int, m: int, ef_construction: int) -> list[Statement]:
        """The tables and indexes of a new store (vectors of ``dim``; the HNSW index's ``m`` and ``ef_construction``)."""
        values = {**self.d.names, "dim": int(dim), "m": int(m), "ef_construction": int(ef_construction)}
        return [(statement.format(**values), []) for statement in _SCHEMA]

    def migration(self, version: int) -> list[Statement]:
        """The statements taking a store of format ``version`` to the next one."""
        return [(statement.format(**self.d.names), []) for statement in _MIGRATIONS[version]]

    def lexical_schema(self) -> list[Statement]:
        """The lexemes column, its function and its index (:mod:`memnets.store.pg_search`)."""
        return [(statement.format(**self.d.names), []) for statement in _LEXICAL_SCHEMA]

    def create_hnsw(self, m: int, ef_construction: int) -> Statement:
        """The HNSW index of the current rows (``m``, ``ef_construction``: its build parameters)."""
        return _HNSW.format(**self.d.names, m=int(m), ef_construction=int(ef_construction)), []

    def lexemes_exist(self) -> Statement:
        """One row where the memories table has the lexemes column."""
        return (
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'lexemes' AND NOT attisdropped",
            [f"{self.d.table}_memories"],
        )

    def extension_version(self) -> Statement:
        """pgvector's version in the database (no row: not installed)."""
        return "SELECT extversion FROM pg_extension WHERE extname = 'vector'", []

    def create_extension(self) -> Statement:
        return "CREATE EXTENSION IF NOT EXISTS vector", []

    def meta_exists(self) -> Statement:
        """One value, NULL while the store has no meta table (an empty database)."""
        return "SELECT to_regclass(%s)", [f"{self.d.table}_meta"]

    def all_meta(self) -> Statement:
        return f"SELECT key, value FROM {self.d.meta}", []

    def add_meta(self) -> str:
        """One meta value (run for many: (key, value) each)."""
        return f"INSERT INTO {self.d.meta} (key, value) VALUES (%s, %s)"

    def set_format(self, version: int) -> Statement:
        return f"UPDATE {self.d.meta} SET value = %s WHERE key = 'format'", [str(int(version)).encode()]

    def tombstones(self) -> Statement:
        """(seq, owner, id) of every tombstone (the format-3 upgrade tags them)."""
        return f"SELECT seq, owner, id FROM {self.d.deletions}", []

    def tag_tombstone(self) -> str:
        """One tombstone's owner and id, by seq (run for many)."""
        return f"UPDATE {self.d.deletions} SET owner = %s, id = %s WHERE seq = %s"

    def all_records(self) -> Statement:
        return f"SELECT {self.d.select()} FROM {self.d.memories}", []

    def set_payload(self, owner: str, memory_id: str, payload: bytes) -> Statement:
        return f"UPDATE {self.d.memories} SET payload = %s WHERE owner = %s AND id = %s", [payload, owner, memory_id]


def _bm25(memories: str, where: str) -> str:
    """The query of (id, score) of the rows matching ``where`` that hold a lexeme of the query text (unordered).
    Parameters: the query text, then ``where``'s twice. Each statistic is computed once (``MATERIALIZED``: the
    planner would otherwise count the owner's rows again for every row it scores)."""
    return f"""
        WITH words AS (SELECT tsvector_to_array(to_tsvector('{CONFIG}', %s)) AS terms),
        matched AS MATERIALIZED (
            SELECT id, lexemes FROM {memories} WHERE {where} AND tsvector_to_array(lexemes) && (SELECT terms FROM words)
        ),
        counts AS (
            SELECT m.id, u.lexeme, cardinality(u.positions) AS tf, length(m.lexemes) AS dl
            FROM matched m CROSS JOIN words CROSS JOIN unnest(m.lexemes) u WHERE u.lexeme = ANY(words.terms)
        ),
        owned AS MATERIALIZED (SELECT count(*) AS n FROM {memories} WHERE {where}),
        documents AS MATERIALIZED (SELECT lexeme, count(*) AS df FROM counts GROUP BY lexeme),
        mean AS MATERIALIZED (SELECT avg(length(lexemes)) AS dl FROM matched)
        SELECT c.id, sum(
            greatest(ln((owned.n - documents.df + 0.5) / (documents.df + 0.5)), 1e-6)
            * c.tf * {K1 + 1} / (c.tf + {K1} * ({1 - B} + {B} * c.dl / mean.dl))
        ) AS score
        FROM counts c JOIN documents USING (lexeme) CROSS JOIN owned CROSS JOIN mean
        GROUP BY c.id"""
