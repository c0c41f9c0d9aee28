"""The embedded archive's lexical index: an SQLite FTS5 table over the current memories' text, ranked by ``bm25()``.

Hybrid search (:mod:`memnets.memory.hybrid`) fuses this ranking with the dense one, so that a name,
a number or a rare word the encoder blurs is still found. The index is built so that it can neither
drift from the rows nor keep deleted text:

- It is an FTS5 *external-content* table (``memories_fts``) over a view of the current rows
  (``memories_text``: the row number, the owner as hex, the content from the payload's JSON), kept in
  step by triggers on ``memories`` inside every write's own transaction: a write, a new version, a
  replace, a deletion, an expiry sweep and a re-embedding's swap change the index with the row, from
  any process, and nothing else writes it. Only current rows are indexed (an older version's text
  leaves the index when its row stops being current).
- The table itself holds no text (external content), but its inverted index holds the terms. FTS5
  removes a term by writing a delete marker, the old segment keeping the term until segments merge,
  so after every deletion or replace the archive merges the whole index into one segment
  (``optimize``, :func:`merge`, run by the archive's ``compact()``) before it scrubs the file;
  ``secure_delete`` zeroes the pages the old segments held, and the checkpoint takes them out of the
  WAL. On a full disk the merge waits for room, as the scrub does (the next ``compact()`` runs it).
- Only an archive without a key has one: with a key the text at rest is sealed, and an index of its
  plain terms would hold what the key protects (hybrid search is refused there, see
  :mod:`memnets.memory.hybrid`). An archive of format 6 gains the index from its rows on its first open
  by this memnets (:func:`create`, from :mod:`memnets.store.sqlite_schema`'s migration).

Ranking: the query's words (stop words dropped, each quoted, so no query text is FTS5 syntax), any of
them, in the owner's rows (the owner's hex is an indexed column matched first, so a query reads the
owner's part of each term's list), by ``bm25()`` (k1 1.2, b 0.75) with the owner column weighted 0.
bm25's statistics (how many rows hold a term, the mean length) are the archive's, all owners
together; which rows are found and returned is the owner's only. The tokenizer is FTS5's
``porter unicode61 remove_diacritics 2``: case and accents folded, English words stemmed.

The index's schema and every statement on it are built by :mod:`memnets.store.queries_sqlite`.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Sequence

from memnets.store.queries_sqlite import SqliteQueries
from memnets.store.sqlite_dialect import SqliteDialect

log = logging.getLogger(__name__)

MAX_TERMS = 32  # the most distinct query words matched: a pasted page still costs a bounded query
# English words too common to rank by; FTS5 has no stop words of its own, and each of these would read
# a list of most of the owner's rows for nothing (bm25 weighs them near 0)
STOP_WORDS = frozenset(
    "a about after all also am an and any are as at be been before being but by can could did do does doing "
    "for from had has have having he her here hers him his how i if in into is it its itself just me more "
    "most my no nor not now of off on once only or other our ours out over own same she should so some "
    "such than that the their theirs them then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your yours".split()
)
_WORD = re.compile(r"[^\W_]+")  # unicode61's tokens: runs of letters and digits

_Q = SqliteQueries(SqliteDialect())  # its statements (memnets.store.queries_sqlite)


def create(conn: sqlite3.Connection, where: str) -> bool:
    """Inside the caller's write transaction: the lexical index of an archive without a key, built from its
    current rows; returns whether there is one (False, with a warning, where SQLite lacks FTS5)."""
    if not conn.execute(*_Q.has_fts5()).fetchone()[0]:
        log.warning("%s: this SQLite has no FTS5, so the archive keeps no lexical index (hybrid search is off)", where)
        return False
    for statement in _Q.lexical_schema():
        conn.execute(*statement)
    conn.execute(*_Q.lexical_command("rebuild"))
    return True


def merge(conn: sqlite3.Connection) -> None:
    """Merge the index into one segment (FTS5's ``optimize``), so that no older segment keeps the words of a
    row that left the archive (a deletion, a replace); the archive's ``compact()`` runs it before it scrubs
    the file (``secure_delete`` zeroes the pages the old segments held)."""
    conn.execute(*_Q.lexical_command("optimize"))


def exists(conn: sqlite3.Connection) -> bool:
    """Whether the archive has its lexical index."""
    return conn.execute(*_Q.lexical_exists()).fetchone() is not None


def query_words(text: str) -> list[str]:
    """The distinct words of a query that rank (lower-cased, stop words out), at most :data:`MAX_TERMS`."""
    words = dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS)
    return list(words)[:MAX_TERMS]


def match_expression(owner: str, words: Sequence[str]) -> str:
    """The FTS5 query of the owner's rows holding any of ``words`` (each one a quoted string: never syntax)."""
    quoted = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
    return f'owner_key : "{owner.encode("utf-8", "surrogatepass").hex()}" AND body : ({quoted})'
