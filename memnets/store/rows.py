"""How a memory becomes a stored row, shared by every store so they seal, check and read rows alike.

A row keeps in clear what stores must query or order by: owner, id, t, last_access, importance,
kind, superseded_by, and the vector. Everything else (content, links, the structured fields,
metadata) is one JSON payload, sealed with AES-GCM when the store has a key. The associated data
of the seal binds the clear fields (see :func:`row_aad`), so editing one of them or swapping
ciphertexts between rows fails authentication. ``last_access`` is left out on purpose: ``touch``
updates it without re-sealing.

Also here: the key setup of a store (:func:`new_cipher`, :func:`existing_cipher`, over the
``meta`` key/value pairs each store keeps) and the argument checks every store method runs, so
the embedded and the PostgreSQL store raise the same errors for the same bad input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from memnets.memory.crypto import RowCipher, derive_key, new_salt
from memnets.memory.errors import (
    ArchiveIntegrityError,
    ArchiveKeyError,
    InvalidMemoryError,
)
from memnets.records import Memory
from memnets.timeutil import as_utc


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
    payload: bytes
    vector: bytes  # little-endian float32 [dim]


def row_aad(owner: str, memory_id: str, t: str, kind: str, importance: float, vector: bytes,
            superseded_by: str | None) -> bytes:
    """Associated data of a sealed payload: the clear fields beside it, so they cannot be altered or swapped."""
    fields = ["memnets-row-v1", owner, memory_id, t, kind, repr(float(importance)), hashlib.sha256(vector).hexdigest()]
    if superseded_by is not None:  # rows written before versions existed have none and keep their seal
        fields.append(superseded_by)
    return json.dumps(fields, ensure_ascii=False).encode("utf-8")


def encode_row(memory: Memory, vector: np.ndarray, cipher: RowCipher | None, where: str) -> Row:
    """The row of a validated memory (InvalidMemoryError naming it otherwise); payload sealed when ``cipher``."""
    if not isinstance(memory, Memory):
        raise InvalidMemoryError(f"{where}: expected Memory records, got {type(memory).__name__}")
    what = f"{where}: memory {memory.id!r}"
    if not isinstance(memory.content, str) or not memory.content.strip():
        raise InvalidMemoryError(f"{what} has empty or whitespace-only content {memory.content!r:.40}; "
                                 "an empty memory cannot be retrieved meaningfully")
    for name in ("id", "owner", "content", "kind", "agent", "action", "location", "superseded_by"):
        check_unicode(getattr(memory, name), f"{what}: {name}")
    for name in ("links", "objects"):
        for value in getattr(memory, name):
            check_unicode(value, f"{what}: {name}")
    if memory.superseded_by == memory.id:
        raise InvalidMemoryError(f"{what} cannot be superseded by itself")
    try:
        t = as_utc(memory.t, f"{what}: t")
        last_access = as_utc(memory.last_access or memory.t, f"{what}: last_access")
    except TypeError as error:
        raise InvalidMemoryError(str(error)) from None
    payload = {"content": memory.content, "links": list(memory.links), "agent": memory.agent,
               "action": memory.action, "objects": list(memory.objects), "location": memory.location,
               "metadata": memory.metadata}
    try:
        plaintext = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise InvalidMemoryError(f"{what}: metadata must be JSON-serialisable valid Unicode ({error})") from None
    vector_bytes = np.asarray(vector, dtype="<f4").tobytes()
    t_text = t.isoformat()
    if cipher is not None:
        plaintext = cipher.seal(plaintext, row_aad(memory.owner, memory.id, t_text, memory.kind,
                                                   memory.importance, vector_bytes, memory.superseded_by))
    return Row(owner=memory.owner, id=memory.id, t=t_text, t_epoch=t.timestamp(), last_access=last_access.isoformat(),
               importance=float(memory.importance), kind=memory.kind, superseded_by=memory.superseded_by,
               payload=plaintext, vector=vector_bytes)


def decode_row(cipher: RowCipher | None, *, owner: str, memory_id: str, t: str, last_access: str, importance: float,
               kind: str, superseded_by: str | None, payload: bytes, vector: bytes) -> Memory:
    """The Memory of a stored row; ArchiveIntegrityError when its seal or payload does not check out."""
    payload = bytes(payload)
    if cipher is not None:
        payload = cipher.open(payload, row_aad(owner, memory_id, t, kind, importance, bytes(vector), superseded_by),
                              what=f"memory {memory_id!r} of owner {owner!r}")
    try:
        fields = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArchiveIntegrityError(f"memory {memory_id!r} of owner {owner!r}: stored payload is corrupt ({error})") from None
    return Memory(id=memory_id, owner=owner, t=datetime.fromisoformat(t), importance=importance, kind=kind,
                  last_access=datetime.fromisoformat(last_access), content=fields["content"],
                  links=tuple(fields["links"]), agent=fields["agent"], action=fields["action"],
                  objects=tuple(fields["objects"]), location=fields["location"], metadata=fields["metadata"],
                  superseded_by=superseded_by)


# ---------------------------------------------------------------------- keys
def new_cipher(key: bytes | str | None) -> tuple[RowCipher | None, dict[str, bytes]]:
    """For a new store: the cipher of ``key`` (None without one) and the meta entries to keep beside the rows."""
    if key is None:
        return None, {}
    salt = new_salt()
    cipher = RowCipher(derive_key(key, salt))
    return cipher, {"kdf_salt": salt, "key_check": cipher.key_check()}


def existing_cipher(key: bytes | str | None, meta: dict, where: str) -> RowCipher | None:
    """For an existing store with these meta entries: the cipher of ``key``, checked (ArchiveKeyError otherwise)."""
    if "key_check" not in meta:
        if key is not None:
            raise ArchiveKeyError(f"{where} was created without encryption; open it without a key "
                                  "(memories cannot be encrypted after the fact)")
        return None
    if key is None:
        raise ArchiveKeyError(f"{where} is encrypted; pass the key it was created with (key=...)")
    cipher = RowCipher(derive_key(key, bytes(meta["kdf_salt"])))
    cipher.verify_key_check(bytes(meta["key_check"]))
    return cipher


# ---------------------------------------------------------------------- argument checks
def check_unicode(value: str | None, what: str) -> None:
    """Reject strings that cannot be stored as UTF-8 (lone surrogates from bad decoding)."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidMemoryError(f"{what} is not valid Unicode: {error.reason} at position {error.start} "
                                 f"({value[max(0, error.start - 10):error.start + 10]!r})") from None


def check_owner(owner: str, where: str) -> None:
    """ValueError unless ``owner`` is a non-empty valid-Unicode string."""
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"{where}: owner must be a non-empty string, got {owner!r}")
    check_unicode(owner, f"{where}: owner")


def check_ids(ids: Iterable[str], where: str) -> list[str]:
    """The ids as a list; TypeError for a bare string or non-string ids."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{where}: ids must be a list of ids, not a single {type(ids).__name__} ({ids!r:.40})")
    ids = list(ids)
    for memory_id in ids:
        if not isinstance(memory_id, str):
            raise TypeError(f"{where}: ids must be strings, got {type(memory_id).__name__} {memory_id!r:.40}")
        check_unicode(memory_id, f"{where}: id")
    return ids


def check_k(k: int, where: str) -> int:
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{where}: k must be an int >= 1, got {k!r}")
    return int(k)


def check_page(limit: int | None, offset: int, where: str) -> None:
    if limit is not None and (not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"{where}: limit must be a non-negative int or None, got {limit!r}")
    if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"{where}: offset must be a non-negative int, got {offset!r}")


def check_dim(dim: int | None, where: str) -> int | None:
    if dim is not None and (not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1):
        raise ValueError(f"{where}: dim must be a positive int or None, got {dim!r}")
    return None if dim is None else int(dim)


def check_vectors(vectors, n: int, dim: int, where: str, *, single: bool = False) -> np.ndarray:
    """``vectors`` as float32 [n, dim] ([1, dim] for one query); InvalidMemoryError naming the bad rows."""
    try:
        array = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidMemoryError(f"{where}: vectors must be a numeric array ({error})") from None
    if single and array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape != (n, dim):
        expected = f"[{dim}]" if single else f"[{n}, {dim}] (one row per memory)"
        raise InvalidMemoryError(f"{where}: vectors must have shape {expected}, got {tuple(np.shape(vectors))}")
    if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) > np.finfo(np.float32).max:
        bad = np.flatnonzero(~(np.isfinite(array) & (np.abs(array) <= np.finfo(np.float32).max)).all(axis=1))
        raise InvalidMemoryError(f"{where}: vector rows {bad[:5].tolist()} contain NaN, inf or values beyond float32")
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
            raise InvalidMemoryError(f"{where}: memory {memory.id!r} of owner {memory.owner!r} appears twice in the batch")
        keys.add((memory.owner, memory.id))
    return memories, array
