"""Encryption at rest for archive rows: AES-GCM with a fresh random 96-bit nonce per write.

A sealed blob is ``VERSION (1 byte) | nonce (12 bytes) | ciphertext+tag``. Callers pass
associated data that names the row (the store, the row's owner, id and version, among others;
see :func:`memnets.store.rows.row_aad`), so a ciphertext copied onto another row, into another
archive, or put back after the row was rewritten fails authentication instead of decrypting.

Keys: raw ``bytes`` of 16, 24 or 32 bytes are used as the AES key directly; a ``str`` is a
passphrase stretched with scrypt over a per-archive random salt. The salt and the KDF's name and
parameters are stored in clear beside the data (:func:`kdf_record`; neither is a secret), so the
cost can be raised for new archives, or for an existing one by rotating its key, while archives
written before the parameters were stored still open (:data:`LEGACY_KDF`).

Other keys needed beside the row key (e.g. the MAC key of the saved index files) are derived
from it with HKDF-SHA256 under a purpose label (:meth:`RowCipher.subkey`), so one secret protects
everything and no derived key can decrypt rows.
"""

from __future__ import annotations

import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from memnets.store.errors import StoreIntegrityError, StoreKeyError

SEAL_VERSION = 1
NONCE_BYTES = 12
SALT_BYTES = 16
_KEY_CHECK_PLAINTEXT = b"memnets archive key check"
_KEY_CHECK_AAD = b"memnets/key-check"
# scrypt at OWASP's Password Storage Cheat Sheet minimum (N=2^17, r=8, p=1: 128 MiB, ~8x the legacy cost)
DEFAULT_KDF = {"name": "scrypt", "n": 2**17, "r": 8, "p": 1}
# what archives written before the parameters were stored used; read when no record is stored
LEGACY_KDF = {"name": "scrypt", "n": 2**14, "r": 8, "p": 1}
# bounds on stored parameters: below the legacy cost is a downgrade, above 1 GiB of memory a denial of service
_SCRYPT_MIN_N, _SCRYPT_MAX_BYTES = 2**14, 1 << 30


def generate_key() -> bytes:
    """A new random 256-bit key (keep it outside the archive directory)."""
    return AESGCM.generate_key(bit_length=256)


def new_salt() -> bytes:
    """A random salt for stretching a passphrase."""
    return os.urandom(SALT_BYTES)


def check_kdf(params: dict) -> dict:
    """``params`` if they name scrypt with a power-of-two ``n`` within the accepted cost bounds, else ValueError."""
    if not isinstance(params, dict) or params.get("name") != "scrypt" or set(params) != {"name", "n", "r", "p"}:
        raise ValueError(f"kdf must be {{'name': 'scrypt', 'n': int, 'r': int, 'p': int}}, got {params!r}")
    n, r, p = params["n"], params["r"], params["p"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (n, r, p)) or n & (n - 1):
        raise ValueError(f"kdf: n must be a power of two and r, p positive ints, got {params!r}")
    if n < _SCRYPT_MIN_N or 128 * n * r > _SCRYPT_MAX_BYTES or p > 16:
        raise ValueError(f"kdf: scrypt cost out of bounds (n >= 2^14, 128*n*r <= 1 GiB, p <= 16), got {params!r}")
    return dict(params)


def kdf_record(params: dict) -> bytes:
    """The stored form of KDF parameters (JSON)."""
    return json.dumps(check_kdf(params), sort_keys=True).encode()


def parse_kdf_record(record: bytes | str | None, where: str) -> dict:
    """KDF parameters from their stored form; :data:`LEGACY_KDF` when none is stored (an older archive)."""
    if record is None:
        return dict(LEGACY_KDF)
    try:
        return check_kdf(json.loads(record))
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise StoreIntegrityError(f"{where}: the stored KDF parameters are unusable ({error})") from None


def derive_key(key: bytes | str, salt: bytes, kdf: dict = DEFAULT_KDF) -> bytes:
    """The AES key for ``key``: raw bytes as they are, a passphrase through scrypt(salt) with ``kdf``'s parameters."""
    if isinstance(key, str):
        if not key:
            raise StoreKeyError("encryption passphrase is empty")
        kdf = check_kdf(kdf)
        return Scrypt(salt=salt, length=32, n=kdf["n"], r=kdf["r"], p=kdf["p"]).derive(key.encode("utf-8"))
    if isinstance(key, (bytes, bytearray)):
        if len(key) not in (16, 24, 32):
            raise StoreKeyError(f"encryption key must be 16, 24 or 32 bytes (AES-128/192/256), got {len(key)} bytes")
        return bytes(key)
    raise StoreKeyError(f"encryption key must be bytes or a passphrase str, got {type(key).__name__}")


class RowCipher:
    """Seals and opens archive blobs with one AES-GCM key."""

    def __init__(self, aes_key: bytes) -> None:
        self._aead = AESGCM(aes_key)
        self._key = bytes(aes_key)

    def subkey(self, purpose: bytes) -> bytes:
        """A 256-bit key for another ``purpose`` (a label such as ``b"memnets/index-mac/v1"``), by HKDF-SHA256.

        Knowing a subkey reveals neither the row key nor another purpose's subkey.
        """
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"memnets subkey: " + purpose).derive(
            self._key
        )

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt ``plaintext`` bound to ``aad`` under a fresh random nonce."""
        nonce = os.urandom(NONCE_BYTES)
        return bytes([SEAL_VERSION]) + nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: bytes, aad: bytes, *, what: str) -> bytes:
        """Decrypt a sealed blob; ``what`` names the row in the error when it does not authenticate."""
        if len(blob) < 1 + NONCE_BYTES + 16 or blob[0] != SEAL_VERSION:
            raise StoreIntegrityError(f"{what}: stored ciphertext is malformed (truncated or unknown seal version)")
        try:
            return self._aead.decrypt(blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :], aad)
        except InvalidTag:
            raise StoreIntegrityError(
                f"{what}: ciphertext failed authentication (the row was tampered with, rolled back to an older "
                "version, swapped from another row, copied from another archive, or written under another key)"
            ) from None

    def key_check(self) -> bytes:
        """A sealed token stored once per archive, so a wrong key fails at open, not at first read."""
        return self.seal(_KEY_CHECK_PLAINTEXT, _KEY_CHECK_AAD)

    def verify_key_check(self, token: bytes) -> None:
        """Raise StoreKeyError unless ``token`` was sealed with this key."""
        try:
            ok = self.open(token, _KEY_CHECK_AAD, what="key check") == _KEY_CHECK_PLAINTEXT
        except StoreIntegrityError:
            ok = False
        if not ok:
            raise StoreKeyError("wrong encryption key for this archive (key check failed)")
