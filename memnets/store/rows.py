"""How a memory becomes a stored row, shared by every store so they seal, check and read rows alike.

A row keeps in clear what stores must query or order by: owner, id, t, last_access, importance,
kind, superseded_by, the row version, the expiry (``expires_at`` and the ``ttl`` that refreshes
it), and the vector. Everything else (content, links, the structured fields, metadata, the
session, ``updated_at``: rows written before it had one read it as ``t``) is one JSON payload,
sealed with AES-GCM when the store has a key. The associated data
of the seal binds the clear fields, the store's random id and the row's version (see
:func:`row_aad`), so editing a clear field, swapping ciphertexts between rows, copying a row into
another store under the same key, or putting back an older ciphertext of a row after it was
rewritten (its version moved on) fails authentication. ``last_access`` and the expiry are left out
on purpose: ``touch`` and a TTL refresh update them without re-sealing, so they are not
authenticated (docs/security.md).

A store writes a row in two steps: :func:`encode_row` validates the memory and builds the
plaintext row before any transaction; :func:`seal_row`, inside the write transaction, gives it
its version (the stored one plus one) and seals it.

The deletion ledger (tombstones other processes read, see ``deleted_since``) names owners and ids
only by keyed hashes (:func:`ledger_tag`), so that an erased user leaves no name behind in it.

Also here: the key setup of a store (:func:`new_cipher`, :func:`existing_cipher`, over the
``meta`` key/value pairs each store keeps, the KDF parameters among them) and the argument
checks every store method runs, so the embedded and the PostgreSQL store raise the same errors
for the same bad input.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from memnets.argerrors import ArgumentTypeError, ArgumentValueError, field_of
from memnets.records import Memory
from memnets.store.chunks import sealed_bytes
from memnets.store.crypto import (
    DEFAULT_KDF,
    RowCipher,
    derive_key,
    kdf_record,
    new_salt,
    parse_kdf_record,
)
from memnets.store.errors import (
    InvalidMemoryError,
    StoreIntegrityError,
    StoreKeyError,
)
from memnets.timeutil import as_utc

VERSION_SEPARATOR = "~"  # older versions of memory "x" are stored as "x~1", "x~2", ... (see new_version)
# The fields of a stored memory as every store selects them, in this order (each dialect names its
# columns, :attr:`memnets.store.dialect.SqlDialect.columns`); "key" is the row's write order (the
# archive's row number, the PostgreSQL seq). Records are read by these names only (:func:`named`).
FIELDS = (
    "key",
    "owner",
    "id",
    "t",
    "last_access",
    "importance",
    "kind",
    "superseded_by",
    "payload",
    "vector",
    "version",
    "expires_at",
    "ttl",
    "chunks",
)


def named(record) -> dict:
    """A selected memory record (its first ``len(FIELDS)`` values) by field name."""
    return dict(zip(FIELDS, record))


@dataclass(frozen=True)
class Row:
    """The stored form of one memory: clear columns, the (sealed) payload and the float32 vector bytes."""

    owner: str
    id: str
    t: str  # ISO 8601 as stored; bound into the seal exactly as written
    t_epoch: float
    last_access: str
    importance: float
    kind: str
    superseded_by: str | None
    payload: bytes  # plaintext JSON from encode_row; sealed by seal_row when the store has a key
    vector: bytes  # little-endian float32 [dim]
    version: int = 0  # 1 on the first write of (owner, id), +1 on each rewrite; 0 until seal_row
    expires_at: str | None = None  # ISO 8601 UTC; None: never expires
    expires_epoch: float | None = None  # the same instant, for SQL comparisons
    ttl: float | None = None  # seconds; what a refresh on read adds to its time
    chunks: bytes | None = None  # float32 [m, dim] of a long memory's further windows (memnets.store.chunks)


def new_store_id() -> str:
    """A random id for a new store, kept in its meta and bound into every row's seal."""
    return uuid.uuid4().hex


def row_aad(
    owner: str,
    memory_id: str,
    t: str,
    kind: str,
    importance: float,
    vector: bytes,
    superseded_by: str | None,
    *,
    store_id: str | None,
    version: int | None,
) -> bytes:
    """Associated data of a sealed payload: the clear fields beside it, the store's id and the row's version.

    So a clear field cannot be altered, a ciphertext cannot be moved to another row or another
    store, and an older ciphertext of the row cannot be put back once the version moved on.
    ``store_id=None`` gives the layout of rows sealed before stores bound their id and a version
    ("memnets-row-v1"); it is read only to re-seal such rows when a store is upgraded.
    """
    vector_digest = hashlib.sha256(vector).hexdigest()
    if store_id is None:
        fields = ["memnets-row-v1", owner, memory_id, t, kind, repr(float(importance)), vector_digest]
        if superseded_by is not None:  # rows written before versions existed have none and keep their seal
            fields.append(superseded_by)
    else:
        fields = [
            "memnets-row-v2",
            store_id,
            int(version),
            owner,
            memory_id,
            t,
            kind,
            repr(float(importance)),
            vector_digest,
            superseded_by,
        ]
    return json.dumps(fields, ensure_ascii=False).encode("utf-8")


def deleted_by_tombstones(memories: Iterable[Memory], tombstones: Iterable[tuple], t_value, secret: bytes) -> set[str]:
    """Ids of ``memories`` that a tombstone deletes: the deletion-ledger rule both stores apply.

    A tombstone is ``(id tag, before)``: the tag (:func:`ledger_tag` of owner and id under the store's
    ``secret``) None deletes every memory of its owner, ``before`` None every time, else memories with
    ``t_value(memory)`` earlier than it (each store keeps ``before`` in its own time unit, so it says
    how to read a memory's ``t``).
    """
    tombstones = list(tombstones)
    return {
        memory.id
        for memory in memories
        if any(
            (stone_id is None or stone_id == ledger_tag(secret, memory.owner, memory.id))
            and (before is None or t_value(memory) < before)
            for stone_id, before in tombstones
        )
    }


_LEDGER_PURPOSE = b"memnets/ledger-tag/v1"


def ledger_secret(meta: dict) -> tuple[bytes, dict[str, bytes]]:
    """The key of a store's ledger tags and the meta entries to add for it (none once it exists).

    A random secret kept in the store's meta (also under a row key: it must survive a key rotation,
    since other processes compare tags across it). The tags keep names out of the ledger's rows; a
    reader of the whole store who holds the secret can still test a guessed name against them.
    """
    if "ledger_secret" in meta:
        return bytes(meta["ledger_secret"]), {}
    secret = os.urandom(32)
    return secret, {"ledger_secret": secret}


def ledger_tag(secret: bytes, owner: str, memory_id: str | None = None) -> str:
    """The keyed hash (HMAC-SHA256, hex) that stands for an owner, or one of its memory ids, in the ledger."""
    parts = ["owner", owner] if memory_id is None else ["id", owner, memory_id]
    return hmac.new(secret, json.dumps(parts, ensure_ascii=False).encode("utf-8"), "sha256").hexdigest()


def ledger_row(secret: bytes, owner: str | None, memory_id: str | None, before) -> tuple:
    """A tombstone (owner, id, before) as the ledger stores it: owner and id by their tags (None stays None)."""
    return (
        None if owner is None else ledger_tag(secret, owner),
        None if memory_id is None else ledger_tag(secret, owner, memory_id),
        before,
    )


def seal_row(row: Row, cipher: RowCipher | None, store_id: str, version: int) -> Row:
    """``row`` at ``version`` (call inside the write transaction: the stored version + 1, or 1 for a new row),
    its payload sealed to the store and the version when ``cipher``."""
    payload = row.payload
    if cipher is not None:
        payload = cipher.seal(
            payload,
            row_aad(
                row.owner,
                row.id,
                row.t,
                row.kind,
                row.importance,
                sealed_bytes(row.vector, row.chunks),
                row.superseded_by,
                store_id=store_id,
                version=version,
            ),
        )
    return replace(row, payload=payload, version=int(version))


def version_id(memory_id: str, count: int, exists: Callable[[str], bool]) -> str:
    """The id of the next older version of ``memory_id``: ``{id}~{n}``, ``n`` one more than the ``count`` of
    versions it has, moved on past any id that ``exists`` (an id a user chose may happen to have the
    form: it is never overwritten). The one numbering of versions: only the stores' ``new_version`` calls it,
    inside the write transaction that holds the memory's row (tests/package/test_layering.py checks that)."""
    n = count + 1
    while exists(f"{memory_id}{VERSION_SEPARATOR}{n}"):
        n += 1
    return f"{memory_id}{VERSION_SEPARATOR}{n}"


def memory_of_version(row_id: str) -> str:
    """The memory a row stands for: ``x`` for its older version ``x~2``, the id itself for a current row."""
    return row_id.partition(VERSION_SEPARATOR)[0]


def older_version(current: Memory, id: str, newer: Memory) -> Memory:
    """``current`` as the older version it becomes in ``new_version``: ``id`` (:func:`version_id`), superseded by
    its own id, its validity closed where ``newer``'s begins (:func:`closed_by`) when that is later (another fact from
    then on). A version that begins where it does (a metadata correction, a judge's decision or its undo) leaves its
    validity as it was recorded, an end it had included: a read of a known time (:mod:`memnets.store.as_of`) finds
    that end, which a close at its own start would have erased, and a read of a valid time ends it where any later
    version begins anyway."""
    closed = closed_by(current, newer) if newer.valid_from > current.valid_from else current
    return closed.replace(id=id, superseded_by=current.id)


def closed_by(older: Memory, newer: Memory) -> Memory:
    """``older`` with its ``valid_to`` closed at ``newer.valid_from`` (never before its own ``valid_from``:
    a newer fact from before it leaves it an empty interval, a fact that never held; an earlier end is kept)."""
    end = max(older.valid_from, newer.valid_from)
    return older.replace(valid_to=end if older.valid_to is None else min(older.valid_to, end))


def check_new_version(memory: Memory, vector, dim: int, where: str) -> np.ndarray:
    """The checks of ``new_version(memory, vector)``: a Memory that is current (not superseded), one vector [dim]."""
    if not isinstance(memory, Memory):
        raise InvalidMemoryError(f"{where}: expected a Memory record, got {type(memory).__name__}")
    if memory.superseded_by is not None:
        raise InvalidMemoryError(f"{where}: memory {memory.id!r} is marked superseded_by; a new version is current")
    return check_vectors(vector, 1, dim, where, single=True)[0]


def encode_row(memory: Memory, vector: np.ndarray, where: str) -> Row:
    """The plaintext row of a validated memory (InvalidMemoryError naming it otherwise); see :func:`seal_row`."""
    if not isinstance(memory, Memory):
        raise InvalidMemoryError(f"{where}: expected Memory records, got {type(memory).__name__}")
    what = f"{where}: memory {memory.id!r}"
    if not isinstance(memory.content, str) or not memory.content.strip():
        raise InvalidMemoryError(
            f"{what} has empty or whitespace-only content {memory.content!r:.40}; "
            "an empty memory cannot be retrieved meaningfully"
        )
    for name in ("id", "owner", "content", "kind", "agent", "action", "location", "superseded_by", "session"):
        check_unicode(getattr(memory, name), f"{what}: {name}")
    for name in ("links", "objects"):
        for value in getattr(memory, name):
            check_unicode(value, f"{what}: {name}")
    if memory.superseded_by == memory.id:
        raise InvalidMemoryError(f"{what} cannot be superseded by itself")
    try:
        t = as_utc(memory.t, f"{what}: t")
        last_access = as_utc(memory.last_access or memory.t, f"{what}: last_access")
        expires = None if memory.expires_at is None else as_utc(memory.expires_at, f"{what}: expires_at")
        updated_at = as_utc(memory.updated_at or memory.t, f"{what}: updated_at")
    except TypeError as error:
        raise InvalidMemoryError(str(error), field=field_of(error)) from None
    check_no_nul(memory.metadata, f"{what}: metadata")
    operators = [name for name in memory.metadata if isinstance(name, str) and name.startswith("$")]
    if operators:  # a filter reads a "$" key as an operator, so such a field could never be matched
        raise InvalidMemoryError(
            f"{what}: metadata field names may not start with '$', got {operators[0]!r}", field="metadata"
        )
    payload = {
        "content": memory.content,
        "links": list(memory.links),
        "agent": memory.agent,
        "action": memory.action,
        "objects": list(memory.objects),
        "location": memory.location,
        "metadata": memory.metadata,
        "session": memory.session,
        **validity_fields(memory, updated_at),
    }
    if updated_at != t:  # sealed with the content; a row without it (a first version, or written before it) reads t
        payload["updated_at"] = updated_at.isoformat()
    try:
        plaintext = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise InvalidMemoryError(
            f"{what}: metadata must be JSON-serialisable valid Unicode ({error})", field="metadata"
        ) from None
    vector_bytes = np.asarray(vector, dtype="<f4").tobytes()
    t_text = t.isoformat()
    return Row(
        owner=memory.owner,
        id=memory.id,
        t=t_text,
        t_epoch=t.timestamp(),
        last_access=last_access.isoformat(),
        importance=float(memory.importance),
        kind=memory.kind,
        superseded_by=memory.superseded_by,
        payload=plaintext,
        vector=vector_bytes,
        expires_at=None if expires is None else expires.isoformat(),
        expires_epoch=None if expires is None else expires.timestamp(),
        ttl=memory.ttl,
    )


def decode_row(cipher: RowCipher | None, store_id: str, fields: dict) -> Memory:
    """The Memory of a stored row, from its record by field name (:func:`named`, times as ISO text and the
    vector as bytes: :meth:`memnets.store.dialect.SqlDialect.row_text`); StoreIntegrityError, naming the
    row, when its seal or payload does not check out.

    A search decodes every result this way, so the work is kept to what the Memory needs: a time equal
    to ``t`` as stored (``last_access`` of an untouched memory, ``updated_at`` and ``valid_from`` of a
    first version) is passed as None, which Memory reads as ``t``, instead of being parsed again.
    """
    owner, memory_id, t, version = fields["owner"], fields["id"], fields["t"], fields["version"]
    kind, importance, superseded_by = fields["kind"], fields["importance"], fields["superseded_by"]
    payload = bytes(fields["payload"])
    if cipher is not None:
        vector = sealed_bytes(fields["vector"], fields["chunks"])
        aad = row_aad(owner, memory_id, t, kind, importance, vector, superseded_by, store_id=store_id, version=version)
        payload = cipher.open(payload, aad, what=f"memory {memory_id!r} of owner {owner!r} (row version {version})")
    try:
        stored = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StoreIntegrityError(
            f"memory {memory_id!r} of owner {owner!r}: stored payload is corrupt ({error})"
        ) from None
    expires_at, updated_at = fields["expires_at"], stored.get("updated_at")
    return Memory.restored(
        id=memory_id,
        owner=owner,
        t=datetime.fromisoformat(t),
        importance=importance,
        kind=kind,
        last_access=_time_unless(fields["last_access"], t),
        content=stored["content"],
        links=tuple(stored["links"]),
        agent=stored["agent"],
        action=stored["action"],
        objects=tuple(stored["objects"]),
        location=stored["location"],
        metadata=stored["metadata"],
        superseded_by=superseded_by,
        session=stored.get("session"),  # rows written before scopes have none
        expires_at=None if expires_at is None else datetime.fromisoformat(expires_at),
        ttl=fields["ttl"],
        updated_at=_time_unless(updated_at, t),
        **validity_from(stored, updated_at or t),
    )


def _time_unless(text: str | None, default: str) -> datetime | None:
    """The stored time ``text``, or None (what Memory fills from the time it defaults to) when it is absent
    or the same text as ``default``, that time as stored."""
    return None if text is None or text == default else datetime.fromisoformat(text)


def validity_fields(memory: Memory, updated_at: datetime) -> dict:
    """The payload entries of a memory's validity (sealed with its content; see :func:`validity_from`),
    those at their defaults left out: every row is read, and most are a current fact valid from
    when it was written (``valid_from`` = ``updated_at``, no end, no invalidation)."""
    entries = {
        "valid_from": None if memory.valid_from == updated_at else memory.valid_from.isoformat(),
        "valid_to": None if memory.valid_to is None else memory.valid_to.isoformat(),
        "invalidated_by": memory.invalidated_by,
        "invalidation_score": memory.invalidation_score,
        "likely_replaced_by": memory.likely_replaced_by,
        "likely_replaced_score": memory.likely_replaced_score,
    }
    return {name: value for name, value in entries.items() if value is not None}


def validity_from(fields: dict, updated_at: str | None = None) -> dict:
    """Memory arguments of a payload's validity entries; rows written before validity existed have none
    and read as valid from their ``updated_at`` on, open (an older version's end is its successor's
    start: :func:`memnets.store.as_of.visible`). A ``valid_from`` that is the text ``updated_at`` (the
    row's, as stored) is left None too: Memory's default, that same time, without a second parse."""
    return {
        "valid_from": _time_unless(fields.get("valid_from") or None, updated_at),
        "valid_to": datetime.fromisoformat(fields["valid_to"]) if fields.get("valid_to") else None,
        "invalidated_by": fields.get("invalidated_by"),
        "invalidation_score": fields.get("invalidation_score"),
        "likely_replaced_by": fields.get("likely_replaced_by"),
        "likely_replaced_score": fields.get("likely_replaced_score"),
    }


# ---------------------------------------------------------------------- keys
def new_cipher(key: bytes | str | None, kdf: dict = DEFAULT_KDF) -> tuple[RowCipher | None, dict[str, bytes]]:
    """For a new store (or a new key): the cipher of ``key`` (None without one) and the meta entries to keep
    beside the rows: a fresh salt, the KDF parameters a passphrase is stretched with, and the key check."""
    if key is None:
        return None, {}
    salt = new_salt()
    cipher = RowCipher(derive_key(key, salt, kdf))
    return cipher, {"kdf_salt": salt, "kdf": kdf_record(kdf), "key_check": cipher.key_check()}


def existing_cipher(key: bytes | str | None, meta: dict, where: str) -> RowCipher | None:
    """For an existing store with these meta entries: the cipher of ``key``, checked (StoreKeyError otherwise)."""
    if "key_check" not in meta:
        if key is not None:
            raise StoreKeyError(
                f"{where} was created without encryption; open it without a key "
                "(memories cannot be encrypted after the fact)"
            )
        return None
    if key is None:
        raise StoreKeyError(f"{where} is encrypted; pass the key it was created with (key=...)")
    cipher = RowCipher(derive_key(key, bytes(meta["kdf_salt"]), parse_kdf_record(meta.get("kdf"), where)))
    cipher.verify_key_check(bytes(meta["key_check"]))
    return cipher


# ---------------------------------------------------------------------- argument checks
def check_unicode(value: str | None, what: str) -> None:
    """Reject strings that cannot be stored as UTF-8 (lone surrogates from bad decoding) or hold a NUL."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidMemoryError(
            f"{what} is not valid Unicode: {error.reason} at position {error.start} "
            f"({value[max(0, error.start - 10) : error.start + 10]!r})"
        ) from None
    refuse_nul(value, what)


def refuse_nul(value: str, what: str, field: str | None = None) -> None:
    """InvalidMemoryError naming ``what`` and the position when ``value`` holds a NUL (U+0000): PostgreSQL holds
    none in text, so both stores refuse it alike."""
    if (nul := value.find("\x00")) >= 0:
        raise InvalidMemoryError(f"{what} contains NUL (U+0000) at position {nul}, which no memory holds", field=field)


def check_no_nul(value, what: str) -> None:
    """InvalidMemoryError naming the place (``what['key'][2]``) of the first string or field name of a JSON ``value``
    that holds a NUL (U+0000): PostgreSQL holds none in text, so both stores refuse it alike when it is written
    (rows written before are read as they are)."""

    def place(keys: tuple) -> str:  # built only for a refusal: the walk runs on every row written
        return what + "".join(f"[{key!r}]" for key in keys)

    stack: list[tuple[object, tuple]] = [(value, ())]
    while stack:
        item, keys = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                refuse_nul(item, place(keys), field="metadata")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    raise InvalidMemoryError(
                        f"{place(keys)}: the field name {key!r} contains NUL (U+0000), which no memory holds",
                        field="metadata",
                    )
                stack.append((child, (*keys, key)))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, (*keys, n)) for n, child in enumerate(item))


def check_owner(owner: str, where: str) -> None:
    """ValueError unless ``owner`` is a non-empty valid-Unicode string."""
    if not isinstance(owner, str) or not owner:
        raise ArgumentValueError(f"{where}: owner must be a non-empty string, got {owner!r}", field="owner")
    check_unicode(owner, f"{where}: owner")


def check_ids(ids: Iterable[str], where: str) -> list[str]:
    """The ids as a list; TypeError for a bare string or non-string ids."""
    if isinstance(ids, (str, bytes)):
        raise ArgumentTypeError(
            f"{where}: ids must be a list of ids, not a single {type(ids).__name__} ({ids!r:.40})", field="ids"
        )
    ids = list(ids)
    for memory_id in ids:
        if not isinstance(memory_id, str):
            raise ArgumentTypeError(
                f"{where}: ids must be strings, got {type(memory_id).__name__} {memory_id!r:.40}", field="ids"
            )
        check_unicode(memory_id, f"{where}: id")
    return ids


def check_k(k: int, where: str) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ArgumentValueError(f"{where}: k must be an int >= 1, got {k!r}", field="k")
    return int(k)


def check_page(limit: int | None, offset: int, where: str) -> None:
    if limit is not None and (not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0):
        raise ArgumentValueError(f"{where}: limit must be a non-negative int or None, got {limit!r}", field="limit")
    if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool) or offset < 0:
        raise ArgumentValueError(f"{where}: offset must be a non-negative int, got {offset!r}", field="offset")


def check_dim(dim: int | None, where: str) -> int | None:
    if dim is not None and (not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1):
        raise ArgumentValueError(f"{where}: dim must be a positive int or None, got {dim!r}", field="dim")
    return None if dim is None else int(dim)


def check_vectors(vectors, n: int, dim: int, where: str, *, single: bool = False) -> np.ndarray:
    """``vectors`` as float32 [n, dim] ([1, dim] for one query); InvalidMemoryError naming the bad rows."""
    try:
        array = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidMemoryError(f"{where}: vectors must be a numeric array ({error})", field="vectors") from None
    if single and array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape != (n, dim):
        expected = f"[{dim}]" if single else f"[{n}, {dim}] (one row per memory)"
        raise InvalidMemoryError(
            f"{where}: vectors must have shape {expected}, got {tuple(np.shape(vectors))}", field="vectors"
        )
    if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) > np.finfo(np.float32).max:
        bad = np.flatnonzero(~(np.isfinite(array) & (np.abs(array) <= np.finfo(np.float32).max)).all(axis=1))
        raise InvalidMemoryError(
            f"{where}: vector rows {bad[:5].tolist()} contain NaN, inf or values beyond float32", field="vector"
        )
    return array.astype(np.float32)


def check_batch(memories, vectors, dim: int, where: str) -> tuple[list[Memory], np.ndarray]:
    """The batch of an upsert, checked: Memory records, matching vectors, no (owner, id) twice."""
    memories = list(memories)
    array = check_vectors(vectors, len(memories), dim, where)
    keys = set()
    for memory in memories:
        if not isinstance(memory, Memory):
            raise InvalidMemoryError(f"{where}: expected Memory records, got {type(memory).__name__}")
        if (memory.owner, memory.id) in keys:
            raise InvalidMemoryError(
                f"{where}: memory {memory.id!r} of owner {memory.owner!r} appears twice in the batch"
            )
        keys.add((memory.owner, memory.id))
    return memories, array
