"""Checkpoints encrypted at rest with LangGraph's own ``EncryptedSerializer`` (notebook 02).

Redaction keeps the secrets it recognises out of state; this is the defence
in depth for what it does not recognise (a password the user typed, a form
no rule knows): every checkpoint and pending write goes through AES (EAX
mode, pycryptodome) before it reaches SQLite or Postgres, with the key in
``LANGGRAPH_AES_KEY``, the variable and format LangGraph itself reads (16, 24
or 32 bytes of text), so the files stay readable by any LangGraph process that
holds the key. ``agentstate.persistence`` takes ``encrypt=True`` on every
checkpointer. A wrong key, a missing key, or an encrypted checkpoint opened
without ``encrypt=True`` fails with one clear line that never shows the key.
What it does not cover (streams, the provider, process memory, Postgres's
inline primitive values) is in ``docs/secrets.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

KEY_VAR = "LANGGRAPH_AES_KEY"
KEY_BYTES = (16, 24, 32)  # AES-128, AES-192, AES-256


class CheckpointKeyError(ValueError):
    """The checkpoint key is missing, malformed, or not the key the checkpoint was written with."""


def checkpoint_key(environ: Mapping[str, str] | None = None) -> bytes:
    """The AES key in ``LANGGRAPH_AES_KEY``; a one-line :class:`CheckpointKeyError` if unusable."""
    value = (os.environ if environ is None else environ).get(KEY_VAR)
    if not value:
        raise CheckpointKeyError(
            f"encrypted checkpoints need {KEY_VAR}: set it to a secret of 16, 24 or 32 bytes "
            '(e.g. `python -c "import secrets; print(secrets.token_urlsafe(24))"`)'
        )
    key = value.encode()
    if len(key) not in KEY_BYTES:
        raise CheckpointKeyError(
            f"{KEY_VAR} must be 16, 24 or 32 bytes long, not {len(key)} (its value is not shown)"
        )
    return key


class _CheckedCipher(CipherProtocol):
    """LangGraph's AES cipher, with a failed decryption said in one clear line."""

    def __init__(self, cipher: CipherProtocol) -> None:
        self.cipher = cipher

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return self.cipher.encrypt(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        try:
            return self.cipher.decrypt(ciphername, ciphertext)
        except (ValueError, AssertionError):  # pycryptodome: "MAC check failed"
            raise CheckpointKeyError(
                f"a checkpoint could not be decrypted with {KEY_VAR}: it was written with "
                "another key, or the stored bytes were changed"
            ) from None


class PlainSerializer(JsonPlusSerializer):
    """LangGraph's default serializer, refusing clearly to read an encrypted checkpoint."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The checkpoint's value, or :class:`CheckpointKeyError` if it was encrypted."""
        if "+" in data[0]:  # EncryptedSerializer marks its types: msgpack+aes
            raise CheckpointKeyError(
                f"this checkpoint is encrypted ({data[0]}): open the checkpointer with "
                f"encrypt=True and {KEY_VAR} set"
            )
        return super().loads_typed(data)


def checkpoint_serializer(
    encrypt: bool, environ: Mapping[str, str] | None = None
) -> SerializerProtocol:
    """The serializer for a checkpointer: AES with ``LANGGRAPH_AES_KEY``, or plain.

    Raises :class:`CheckpointKeyError` before anything is opened when the key
    is missing or malformed, and ``ImportError`` naming the package when
    pycryptodome is not installed.
    """
    if not isinstance(encrypt, bool):
        raise TypeError(f"encrypt must be True or False, got {encrypt!r}")
    if not encrypt:
        return PlainSerializer()
    key = checkpoint_key(environ)
    try:
        import Crypto.Cipher.AES  # noqa: F401  (LangGraph imports it too; a clearer error here)
    except ImportError:
        raise ImportError(
            "encrypted checkpoints need pycryptodome (pip install pycryptodome==4.4.0)"
        ) from None
    aes = EncryptedSerializer.from_pycryptodome_aes(JsonPlusSerializer(), key=key)
    return EncryptedSerializer(_CheckedCipher(aes.cipher), aes.serde)
