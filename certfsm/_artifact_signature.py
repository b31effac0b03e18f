"""An artifact's signature: its place in the file, its shape, and the check against trusted keys.

The signature sits at the top level of the document, next to ``payload``
and ``sha256``: ``"signature": {"algorithm": "ed25519", "key_id": 16 hex
digits, "value": base64 of the 64-byte signature}``. It signs exactly
``canonical_bytes(payload)``, the bytes the SHA-256 covers, so the hash
and the canonical form are checked the same way with or without it, and
an unsigned artifact's bytes hold no trace of signing. The SHA-256 alone
only catches accidents (anyone can recompute it after an edit); the
signature ties the payload to a key.

The shape is checked with the standard library alone; only the
verification, which runs when trusted keys are configured, needs
`cryptography` (`certfsm._signing`).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ._artifact_checks import _kind, _show
from ._errors import ArtifactError
from ._signing import ALGORITHM, KEY_ID_DIGITS, SIGNATURE_BYTES, PublicKey

SIGNATURE_KEY = "signature"
_KEYS = ("algorithm", "key_id", "value")
_KEY_ID = re.compile(rf"[0-9a-f]{{{KEY_ID_DIGITS}}}")


@dataclass(frozen=True)
class ArtifactSignature:
    """The signature an artifact carries: the signing key's id, the algorithm and the raw signature bytes."""

    key_id: str
    algorithm: str
    value: bytes

    def to_json(self) -> dict[str, str]:
        return {
            "algorithm": self.algorithm,
            "key_id": self.key_id,
            "value": base64.b64encode(self.value).decode("ascii"),
        }


def _resign(label: str) -> str:
    return f"the signature was damaged or edited; re-sign it with certfsm sign {label} --key KEY"


def signature_of(document: Mapping[str, Any], label: str) -> ArtifactSignature | None:
    """The document's signature (None when it has none), once its shape is right; ArtifactError naming the field."""
    if SIGNATURE_KEY not in document:
        return None
    entry = document[SIGNATURE_KEY]
    if not isinstance(entry, dict):
        raise ArtifactError(f"{label}: signature is {_kind(entry)}, not an object; {_resign(label)}")
    if sorted(entry) != list(_KEYS):
        raise ArtifactError(
            f"{label}: signature has the keys {', '.join(sorted(entry)) or 'none'}, expected exactly "
            f"{', '.join(_KEYS)}; {_resign(label)}"
        )
    algorithm, key_id, value = entry["algorithm"], entry["key_id"], entry["value"]
    if algorithm != ALGORITHM:
        raise ArtifactError(
            f'{label}: signature.algorithm={_show(algorithm)} is not "{ALGORITHM}", the only '
            f"signature algorithm this certfsm reads; {_resign(label)}"
        )
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise ArtifactError(
            f"{label}: signature.key_id={_show(key_id)} is not {KEY_ID_DIGITS} lowercase hex digits; {_resign(label)}"
        )
    raw = None
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != SIGNATURE_BYTES or base64.b64encode(raw).decode("ascii") != value:
        raise ArtifactError(
            f"{label}: signature.value={_show(value)[:40]} is not the standard base64 of a "
            f"{SIGNATURE_BYTES}-byte {ALGORITHM} signature; {_resign(label)}"
        )
    return ArtifactSignature(key_id, algorithm, raw)


def check_signature(
    signature: ArtifactSignature | None, body: bytes, trusted: Mapping[str, PublicKey], label: str
) -> None:
    """Refuse unless `signature` is a trusted key's valid signature of `body` (the canonical payload bytes)."""
    ids = ", ".join(trusted)
    if signature is None:
        raise ArtifactError(
            f"{label}: the artifact is unsigned, but trusted keys are configured (key id {ids}); "
            f"sign it with certfsm sign {label} --key KEY using a trusted private key"
        )
    key = trusted.get(signature.key_id)
    if key is None:
        raise ArtifactError(
            f"{label}: signed by key id {signature.key_id}, which is not a trusted key (trusted: key "
            f"id {ids}); re-sign it with certfsm sign {label} --key KEY using a trusted private key, "
            f"or trust {signature.key_id}'s public key if you mean to"
        )
    if not key.verifies(signature.value, body):
        raise ArtifactError(
            f"{label}: the signature by key id {signature.key_id} does not verify over the payload: "
            "the payload or the signature was changed after signing (a matching sha256 proves "
            "nothing, anyone can recompute it); do not run it, get the artifact again from its "
            "signer or re-sign a trusted copy with certfsm sign"
        )
