"""Encryption at rest for archive rows: AES-GCM with a fresh random 96-bit nonce per write.

A sealed blob is ``VERSION (1 byte) | nonce (12 bytes) | ciphertext+tag``. Callers pass
associated data that names the row (its owner and id, among others), so a ciphertext copied
onto another row fails authentication instead of decrypting into the wrong memory.

Keys: raw ``bytes`` of 16, 24 or 32 bytes are used as the AES key directly; a ``str`` is a
passphrase stretched with scrypt over a per-archive random salt (stored in clear; a salt is
not a secret).
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from memnets.memory.errors import ArchiveIntegrityError, ArchiveKeyError

SEAL_VERSION = 1
NONCE_BYTES = 12
SALT_BYTES = 16
_KEY_CHECK_PLAINTEXT = b"memnets archive key check"
_KEY_CHECK_AAD = b"memnets/key-check"


def generate_key() -> bytes:
    """A new random 256-bit key (keep it outside the archive directory)."""
    return AESGCM.generate_key(bit_length=256)


def new_salt() -> bytes:
    """A random salt for stretching a passphrase."""
    return os.urandom(SALT_BYTES)


def derive_key(key: bytes | str, salt: bytes) -> bytes:
    """The AES key for ``key``: raw bytes as they are, a passphrase through scrypt(salt)."""
    if isinstance(key, str):
        if not key:
            raise ArchiveKeyError("encryption passphrase is empty")
        return Scrypt(salt=salt, length=32, n=2**14, r=8, p=1).derive(key.encode("utf-8"))
    if isinstance(key, (bytes, bytearray)):
        if len(key) not in (16, 24, 32):
            raise ArchiveKeyError(f"encryption key must be 16, 24 or 32 bytes (AES-128/192/256), got {len(key)} bytes")
        return bytes(key)
    raise ArchiveKeyError(f"encryption key must be bytes or a passphrase str, got {type(key).__name__}")


class RowCipher:
    """Seals and opens archive blobs with one AES-GCM key."""

    def __init__(self, aes_key: bytes) -> None:
        self._aead = AESGCM(aes_key)

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt ``plaintext`` bound to ``aad`` under a fresh random nonce."""
        nonce = os.urandom(NONCE_BYTES)
        return bytes([SEAL_VERSION]) + nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: bytes, aad: bytes, *, what: str) -> bytes:
        """Decrypt a sealed blob; ``what`` names the row in the error when it does not authenticate."""
        if len(blob) < 1 + NONCE_BYTES + 16 or blob[0] != SEAL_VERSION:
            raise ArchiveIntegrityError(f"{what}: stored ciphertext is malformed (truncated or unknown seal version)")
        try:
            return self._aead.decrypt(blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :], aad)
        except InvalidTag:
            raise ArchiveIntegrityError(
                f"{what}: ciphertext failed authentication (row tampered with, swapped from another row, "
                "or written under another key)"
            ) from None

    def key_check(self) -> bytes:
        """A sealed token stored once per archive, so a wrong key fails at open, not at first read."""
        return self.seal(_KEY_CHECK_PLAINTEXT, _KEY_CHECK_AAD)

    def verify_key_check(self, token: bytes) -> None:
        """Raise ArchiveKeyError unless ``token`` was sealed with this key."""
        try:
            ok = self.open(token, _KEY_CHECK_AAD, what="key check") == _KEY_CHECK_PLAINTEXT
        except ArchiveIntegrityError:
            ok = False
        if not ok:
            raise ArchiveKeyError("wrong encryption key for this archive (key check failed)")
