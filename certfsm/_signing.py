"""Ed25519 keys and signatures for artifacts, through the `cryptography` package (the optional ``sign`` extra).

A key is named by its key id: the first 16 hex digits of the SHA-256 of
the raw 32-byte public key, so anyone holding the public key file can
compute the id an artifact names. Key files are PEM: the private key
PKCS8 (unencrypted, mode 0600), the public key SubjectPublicKeyInfo.

`cryptography` is imported only inside the functions that need it, so
importing this module (the artifact loader does) costs nothing and an
embedded target without `cryptography` still loads artifacts when no
trusted key is configured. No cryptography is written here: keys,
signing and verification are `cryptography`'s.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, TypeAlias

from ._errors import SigningError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ALGORITHM = "ed25519"
KEY_ID_DIGITS = 16
SIGNATURE_BYTES = 64
INSTALL = 'pip install "certfsm[sign]"'


def key_id_of(raw_public_key: bytes) -> str:
    """The key id of a raw 32-byte Ed25519 public key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(raw_public_key).hexdigest()[:KEY_ID_DIGITS]


def _require_cryptography(what: str) -> None:
    """Import the cryptography modules used here; SigningError naming the extra to install when it is missing.

    The callers then import the names they use, which are loaded by now.
    """
    try:
        import cryptography.exceptions  # noqa: F401
        import cryptography.hazmat.primitives.asymmetric.ed25519  # noqa: F401
        import cryptography.hazmat.primitives.serialization  # noqa: F401
    except ImportError:
        raise SigningError(f"{what} needs the cryptography package, which is not installed; run {INSTALL}") from None


@dataclass(frozen=True)
class PublicKey:
    """A trusted Ed25519 public key: its raw 32 bytes, its key id and the file it came from (None in memory)."""

    raw: bytes
    key_id: str
    source: str | None = None

    @classmethod
    def from_raw(cls, raw: bytes, source: str | None = None) -> "PublicKey":
        return cls(bytes(raw), key_id_of(bytes(raw)), source)

    def verifies(self, signature: bytes, message: bytes) -> bool:
        """Whether `signature` is this key's Ed25519 signature of `message`."""
        _require_cryptography("checking a signature")
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import ed25519

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class PrivateKey:
    """An Ed25519 private key loaded from its PEM file; `public` is its public half."""

    key: Ed25519PrivateKey
    public: PublicKey
    source: str

    def sign(self, message: bytes) -> bytes:
        return self.key.sign(message)


def _read_key_file(path: str | os.PathLike[str], role: str, fix: str) -> bytes:
    label = os.fspath(path)
    try:
        return Path(label).read_bytes()
    except FileNotFoundError:
        raise SigningError(f"{label}: no such {role} key file; {fix}") from None
    except OSError as error:
        raise SigningError(f"{label}: cannot read the {role} key file ({error.strerror or error}); {fix}") from None


def load_private_key(path: str | os.PathLike[str]) -> PrivateKey:
    """The Ed25519 private key in the PKCS8 PEM file at `path`; SigningError (one line) for anything else."""
    _require_cryptography("signing")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    label = os.fspath(path)
    fix = "give the private key file written by certfsm keygen --out KEY (not KEY.pub)"
    data = _read_key_file(path, "private", fix)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        what = (
            "a public key, not a private key"
            if b"PUBLIC KEY" in data
            else "not an unencrypted PEM private key (PKCS8), or a damaged one"
        )
        raise SigningError(f"{label}: {what}; {fix}") from None
    except Exception as error:  # cryptography raises its own types for unsupported algorithms
        raise SigningError(f"{label}: not a usable PEM private key ({type(error).__name__}); {fix}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningError(f"{label}: holds a {type(key).__name__.lstrip('_')}, not an Ed25519 key; {fix}")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PrivateKey(key, PublicKey.from_raw(raw, label), label)


def load_public_key(path: str | os.PathLike[str]) -> PublicKey:
    """The Ed25519 public key in the SubjectPublicKeyInfo PEM file at `path`; SigningError (one line) otherwise."""
    _require_cryptography("checking signatures (trusted keys)")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    label = os.fspath(path)
    fix = "give the public key file KEY.pub written by certfsm keygen --out KEY"
    data = _read_key_file(path, "public", fix)
    if b"PRIVATE KEY" in data:
        raise SigningError(
            f"{label}: holds a private key, but a trusted key is a public key; {fix} "
            "(and keep the private key off the target)"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise SigningError(f"{label}: not a PEM public key (SubjectPublicKeyInfo), or a damaged one; {fix}") from None
    except Exception as error:
        raise SigningError(f"{label}: not a usable PEM public key ({type(error).__name__}); {fix}") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SigningError(f"{label}: holds a {type(key).__name__.lstrip('_')}, not an Ed25519 key; {fix}")
    return PublicKey.from_raw(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw), label)


KeySource: TypeAlias = str | os.PathLike[str] | PublicKey
"""A trusted key: the path of its public key file, or the key itself."""


def trusted_key_set(trusted_keys: KeySource | Iterable[KeySource]) -> dict[str, PublicKey]:
    """Trusted keys by key id, from public key file paths or `PublicKey` values; refuses an empty collection.

    An empty collection is refused rather than read as "no check": a
    configuration that meant to pin keys but lists none must not silently
    accept unsigned artifacts.
    """
    if isinstance(trusted_keys, (str, os.PathLike, PublicKey)):
        trusted_keys = [trusted_keys]
    keys = [key if isinstance(key, PublicKey) else load_public_key(key) for key in trusted_keys]
    if not keys:
        raise SigningError(
            "trusted_keys is empty; give at least one public key file (KEY.pub), or None to load "
            "without a signature check"
        )
    return {key.key_id: key for key in keys}


def generate_key_pair(out: str | os.PathLike[str]) -> PublicKey:
    """Write a new Ed25519 private key to `out` (mode 0600) and its public key to `out`.pub; refuses to overwrite.

    Both files are created exclusively (O_EXCL), so an existing key is
    never replaced, not even by a race; when the public key cannot be
    written the private key is removed again.
    """
    _require_cryptography("certfsm keygen")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private_path = Path(os.fspath(out))
    public_path = Path(f"{private_path}.pub")
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise SigningError(_exists(path))
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key()
    public_pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    _create(private_path, private_pem, 0o600)
    try:
        _create(public_path, public_pem, 0o644)
    except BaseException:
        os.unlink(private_path)
        raise
    return PublicKey.from_raw(raw, os.fspath(public_path))


def _exists(path: Path) -> str:
    return (
        f"{path}: already exists; certfsm keygen never overwrites a key, choose another out= or remove the old "
        "key on purpose"
    )


def _create(path: Path, data: bytes, mode: int) -> None:
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise SigningError(_exists(path)) from None
    except OSError as error:
        raise SigningError(
            f"{path}: cannot create the key file ({error.strerror or error}); choose a writable out= path"
        ) from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(path, mode)  # the umask may have narrowed a public key's mode; never widens the private one
    except BaseException:
        os.unlink(path)
        raise
