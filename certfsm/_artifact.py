"""The certified artifact: one canonical-JSON file (``.cfsm``) with a SHA-256 over its payload, and its loader.

The bytes are canonical JSON (`certfsm._canonical`), so the hash names the
payload's value and anything that can read JSON can audit the file.

Format version 2. The file is exactly ``canonical_bytes(document)``, no
trailing newline, where ``document = {"certfsm_artifact": 2, "sha256":
sha256_hex(canonical_bytes(payload)), "payload": payload}``, plus, in a
signed artifact, ``"signature": {"algorithm": "ed25519", "key_id": k,
"value": v}`` where ``v`` is the standard base64 of the 64-byte Ed25519
signature of ``canonical_bytes(payload)`` (the bytes the SHA-256 covers)
and ``k`` the key id of the signing key, the first 16 hex digits of the
SHA-256 of its raw 32-byte public key (`certfsm._artifact_signature`).
The signature lives outside the payload, so signing changes neither the
hash, nor the canonical form, nor an unsigned artifact's bytes; signing is a
rewrite that adds only that key (`sign_artifact`). The payload
(written by `artifact_payload` in `certfsm._artifact_payload`, read by
`load_artifact` through `certfsm._artifact_reading`, two independent
statements of this format) holds no run facts (no times, dates, hosts or worker counts: those are
in the distill report), so the same spec and model give the same bytes;
it holds (cells are numbered flat in C order over the inputs' bins: the last
input's bin varies fastest; output index k is the network's output k):

- ``spec``: ``ControllerSpec.to_json()`` of the spec the table was distilled from;
- ``model_sha256``: SHA-256 of the source ONNX file, 64 lowercase hex digits;
- ``grid``: ``{"edges": [[e0, ..., en] per input], "frac_bits": [f or null per input]}``,
  equal to the spec's edges and frac_bits;
- ``table``: ``{"proposal": [output index per cell], "status": "ec...",
  "allowed": [bitmask per cell]}``; ``status`` is one character per cell,
  ``e`` exact (the token is proved for the whole cell) or ``c``
  conservative (the cell holds the conservative token); bit k of
  ``allowed`` means output k may be emitted in that cell; a refined
  table adds ``refinement``, the box trees of its refined cells
  (`certfsm._artifact_refinement` states and checks it; absent in a flat
  table, whose bytes it leaves alone), and a refined cell's own entry is
  then the conservative token, ``c`` and the cell's mask, so a reader
  that ignores leaves stays safe;
- ``machine``: ``{"conservative": k, "confirm_cycles": n >= 1,
  "cooldown_cycles": n >= 0, "overridable": [output indices, ascending],
  "codes": [4-bit code per output index, unique]}``, equal to the spec's;
- ``certificate``: ``[{"property": name, "engine": name, "verdict":
  "proved"|"violated"|"unknown", "smt2": file name or null, "smt2_sha256":
  hex or null (null exactly when smt2 is), "required": true|false}, ...]``
  (`certfsm._verdict.VerdictRecord.certificate_entry`; format 1 also held
  each entry's seconds), property names unique, at least one required;
- ``created_by``: ``"certfsm <version>"``.

Loading runs these checks in order and refuses at the first failure with
one line naming the failing item and the fix: the file is readable; it is ASCII
JSON without NaN, infinities or repeated keys; the top-level keys and the
format version and the signature's shape; the hash; the bytes are exactly
the canonical form (a reformatted file is refused even when its payload
is intact); with ``trusted_keys``, the signature: an unsigned artifact,
one signed by a key not trusted, or one whose signature does not verify
over the payload is refused (without trusted keys it is not verified,
and `cryptography` is not even imported); the
structure (`certfsm._artifact_reading`: types, ranges, lengths, the grid
and machine agree with the spec, every cell allows the conservative token
and only legal tokens, every proposal is allowed in its cell, every
conservative cell holds the conservative token, every number in the one
form certfsm writes) and what the loader
re-derives from the payload's own spec (`certfsm._artifact_trust`: edges
from min and max, well-formed legality rules, every allowed mask equal to
the rules', a consistent gate); the certificate (exactly the properties
certfsm distill proves, each required, proved, by an engine that can
prove it). The SHA-256 alone protects against accidents only: anyone
can edit and rehash. With trusted keys the signature closes that: an
edit of a signed payload, however consistent, no longer verifies. What
needs the model is not re-derived here; `certfsm._artifact_trust` lists it. The loaded
artifact holds the spec twice: `Artifact.spec` the document as hashed, `Artifact.stored_spec`
the loader's typed reading of it (`certfsm.StoredSpec`), which every reader uses. The writer
runs the loader's reading on what it encodes, so it
cannot write what the loader refuses (except for unproved entries: an
uncertified artifact may be written so that ``certfsm inspect``
(`certfsm._inspect`) can show why the runtime refuses it).

``certfsm/artifact.schema.json`` describes the same format for readers
outside certfsm (the tests check that whatever this loader accepts, the
schema accepts). The loader does not use it: this module and those it
imports need only the standard library and numpy, so an embedded target
loads artifacts without onnx, maraboupy, z3 or jsonschema.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ._artifact_checks import _HEX64, ARTIFACT_FORMAT_VERSION, _kind, _show
from ._artifact_payload import artifact_payload
from ._artifact_reading import read_payload
from ._artifact_signature import SIGNATURE_KEY, ArtifactSignature, check_signature, signature_of
from ._artifact_trust import certificate_problem, is_certified
from ._box_tree import Refinement
from ._canonical import _canonical, _plain, sha256_hex
from ._errors import ArtifactError
from ._readonly import ReadOnlyDict
from ._signing import ALGORITHM, KeySource, PrivateKey, PublicKey, load_private_key, trusted_key_set
from ._staging import write_atomically
from ._stored_spec import StoredSpec
from ._verdict import VerdictRecord, unproved


ARTIFACT_SUFFIX = ".cfsm"

_RERUN = "re-run certfsm distill"
_FIX_PRODUCER = "fix the code that built the payload: the loader would refuse this artifact"
_TOP_KEYS = ("certfsm_artifact", "payload", "sha256")
_OPTIONAL_TOP_KEYS = (SIGNATURE_KEY,)


class _ReadOnlyDict(ReadOnlyDict):
    """An artifact's spec: read-only so that it stays as hashed."""

    refusal = "an artifact's spec is read-only; copy it with Artifact.payload()"


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return _ReadOnlyDict((key, _freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


@dataclass(frozen=True, eq=False)
class Artifact:
    """A loaded, checked artifact; every array is read-only.

    `proposal` (output index), `exact` and `allowed` (bitmask over output
    indices) have one entry per cell, shaped by the inputs' bin counts
    (``reshape(-1)`` gives the flat C-order numbering of the file).
    `edges[i]` are input i's float64 bin edges. `spec` is the spec document
    as stored and hashed (read-only dicts and tuples); `stored_spec` is the
    loader's typed reading of it, what every reader of the spec uses.
    `path` is None for an artifact that was only built in memory. `signature` is the file's signature
    (None when unsigned); it was verified only when the artifact was
    loaded with trusted keys.
    """

    path: Path | None
    sha256: str
    spec: Mapping[str, Any]
    stored_spec: StoredSpec
    model_sha256: str
    edges: tuple[np.ndarray, ...]
    frac_bits: tuple[int | None, ...]
    proposal: np.ndarray
    exact: np.ndarray
    allowed: np.ndarray
    conservative: int
    confirm_cycles: int
    cooldown_cycles: int
    overridable: tuple[int, ...]
    codes: tuple[int, ...]
    certificate: tuple[VerdictRecord, ...]
    created_by: str
    signature: ArtifactSignature | None = None
    refinement: Refinement | None = None

    def __repr__(self) -> str:
        """A summary a person can read: the dataclass's own repr would print the spec and every table."""
        names = self.stored_spec.input_names
        where = f" from {self.path.name}" if self.path is not None else ""
        return (
            f"Artifact({self.stored_spec.name}{where}: {len(names)} inputs, {self.n_cells} cells "
            f"({'x'.join(map(str, self.shape))}), {len(self.token_names)} tokens, {len(self.certificate)} certificate "
            f"entries{', signed' if self.signature is not None else ''}; sha256 {self.sha256[:12]}...)"
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(e) - 1 for e in self.edges)

    @property
    def n_cells(self) -> int:
        return int(self.proposal.size)

    @property
    def n_inputs(self) -> int:
        return len(self.edges)

    @property
    def n_outputs(self) -> int:
        return len(self.codes)

    @property
    def token_names(self) -> tuple[str, ...]:
        return self.stored_spec.outputs

    @property
    def unproved(self) -> tuple[VerdictRecord, ...]:
        """The required certificate entries that are not proved."""
        return unproved(self.certificate)

    @property
    def is_certified(self) -> bool:
        """The one rule (`certfsm._artifact_trust.is_certified`), the same the loader and `certfsm distill` apply."""
        return is_certified(self.certificate, self.stored_spec, self.has_exact)

    @property
    def has_exact(self) -> bool:
        """Some cell, or some leaf of a refined cell, is exact: what decides whether ``cells-exact`` needs an engine."""
        return bool(self.exact.any()) or (self.refinement is not None and self.refinement.has_exact)

    def payload(self) -> dict[str, Any]:
        """The payload as plain JSON types; ``build_artifact(a.payload())`` gives back the file's bytes."""
        return artifact_payload(
            spec=json.loads(json.dumps(self.spec)),
            model_sha256=self.model_sha256,
            edges=self.edges,
            frac_bits=self.frac_bits,
            proposal=self.proposal,
            exact=self.exact,
            allowed=self.allowed,
            conservative=self.conservative,
            confirm_cycles=self.confirm_cycles,
            cooldown_cycles=self.cooldown_cycles,
            overridable=self.overridable,
            codes=self.codes,
            certificate=self.certificate,
            created_by=self.created_by,
            refinement=self.refinement,
        )


class _Damaged(Exception):
    """Raised from inside json.loads by the hooks that refuse what canonical JSON never holds."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Damaged(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return document


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Damaged(f"the number {text[:40]} overflows a float64")
    return value


def _no_constant(text: str) -> None:
    raise _Damaged(f"it holds {text}, which JSON does not allow")


def _read(path: str | os.PathLike[str], label: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ArtifactError(
            f"{label}: no such file (looked for {os.path.abspath(label)}); give the path of a "
            f"{ARTIFACT_SUFFIX} artifact written by certfsm distill"
        ) from None
    except OSError as error:
        raise ArtifactError(
            f"{label}: cannot read the artifact ({error.strerror or error}); check that the path names a readable file"
        ) from None
    if not data:
        raise ArtifactError(
            f"{label}: the file is empty (the write was interrupted or the file was truncated); {_RERUN}"
        )
    return data


def _parse(data: bytes, label: str) -> Any:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as error:
        raise ArtifactError(
            f"{label}: byte {error.start} is 0x{data[error.start]:02x}, not ASCII, but an artifact "
            f"is ASCII canonical JSON (the file is damaged); {_RERUN}"
        ) from None
    try:
        return json.loads(text, object_pairs_hook=_no_repeats, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ArtifactError(
            f"{label}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg} "
            f"(the file is damaged); {_RERUN}"
        ) from None
    except _Damaged as error:
        raise ArtifactError(f"{label}: not canonical JSON: {error} (the file is damaged); {_RERUN}") from None
    except (ValueError, RecursionError) as error:
        raise ArtifactError(f"{label}: not valid JSON: {str(error)[:80]} (the file is damaged); {_RERUN}") from None


def _envelope(document: Any, label: str) -> tuple[str, dict[str, Any]]:
    """The recorded hash and the payload, once the top level is an artifact of a format this code reads."""
    if not isinstance(document, dict) or "certfsm_artifact" not in document:
        what = "has no 'certfsm_artifact' key" if isinstance(document, dict) else f"is {_kind(document)}"
        raise ArtifactError(
            f"{label}: the top level {what}, so this is not a certfsm artifact; give a "
            f"{ARTIFACT_SUFFIX} file written by certfsm distill"
        )
    version = document["certfsm_artifact"]
    if type(version) is not int or version != ARTIFACT_FORMAT_VERSION:
        raise ArtifactError(
            f"{label}: certfsm_artifact={_show(version)} is not a format this certfsm reads "
            f"(it reads format {ARTIFACT_FORMAT_VERSION}); {_RERUN} with this certfsm"
        )
    for key in _TOP_KEYS:
        if key not in document:
            raise ArtifactError(f"{label}: the top-level key {key!r} is missing (the file is damaged); {_RERUN}")
    for key in document:
        if key not in _TOP_KEYS + _OPTIONAL_TOP_KEYS:
            raise ArtifactError(
                f"{label}: unknown top-level key {key!r} (format {ARTIFACT_FORMAT_VERSION} has only "
                f"{', '.join(_TOP_KEYS + _OPTIONAL_TOP_KEYS)}); the artifact was modified after it was "
                f"written; {_RERUN}"
            )
    signature_of(document, label)
    recorded, payload = document["sha256"], document["payload"]
    if not isinstance(recorded, str) or not _HEX64.fullmatch(recorded):
        raise ArtifactError(
            f"{label}: sha256={_show(recorded)} is not 64 lowercase hex digits (the file is damaged); {_RERUN}"
        )
    if not isinstance(payload, dict):
        raise ArtifactError(f"{label}: payload is {_kind(payload)}, not an object (the file is damaged); {_RERUN}")
    return recorded, payload


def _check_hash(recorded: str, payload: dict[str, Any], label: str) -> None:
    actual = sha256_hex(_canonical(payload))
    if actual != recorded:
        raise ArtifactError(
            f"{label}: sha256 mismatch: the payload hashes to {actual[:16]}... but the file records "
            f"{recorded[:16]}...; the artifact was modified after it was written; {_RERUN}"
        )


def _check_canonical(data: bytes, document: dict[str, Any], label: str) -> None:
    expected = _canonical(document)
    if data != expected:
        at = next((k for k, (a, b) in enumerate(zip(data, expected)) if a != b), min(len(data), len(expected)))
        raise ArtifactError(
            f"{label}: the bytes are not the canonical form of their content (first difference at "
            f"byte {at}), although the payload hash matches; the file was reformatted or edited "
            f"after it was written; {_RERUN}"
        )


def _check_certificate(artifact: Artifact, label: str) -> None:
    """The certificate is exactly what certfsm distill proves for the artifact's spec, all required, all proved, each
    by an engine that can prove it (`certfsm._artifact_trust.certificate_problem`)."""
    refusal = certificate_problem(artifact.certificate, artifact.stored_spec, artifact.has_exact)
    if refusal is not None:
        raise ArtifactError(f"{label}: {refusal.text}; {refusal.fix}")


def _checked(
    payload: Any, label: str, fix: str, sha256: str, path: Path | None, signature: ArtifactSignature | None = None
) -> Artifact:
    """The typed artifact of a parsed `payload` once the loader's reading (`certfsm._artifact_reading`) passes; the
    spec document is frozen as hashed."""
    read = read_payload(payload, label, fix)
    return Artifact(
        path=path,
        sha256=sha256,
        spec=_freeze(read.spec),
        stored_spec=read.stored_spec,
        model_sha256=read.model_sha256,
        edges=read.edges,
        frac_bits=read.frac_bits,
        proposal=read.proposal,
        exact=read.exact,
        allowed=read.allowed,
        conservative=read.conservative,
        confirm_cycles=read.confirm_cycles,
        cooldown_cycles=read.cooldown_cycles,
        overridable=read.overridable,
        codes=read.codes,
        certificate=read.certificate,
        created_by=read.created_by,
        signature=signature,
        refinement=read.refinement,
    )


def _check_signature(
    document: dict[str, Any], payload: dict[str, Any], label: str, trusted: Mapping[str, PublicKey]
) -> ArtifactSignature:
    """With trusted keys (by key id), refuse an unsigned artifact, a key not trusted or a signature that fails;
    returns the signature that verified."""
    signature = signature_of(document, label)
    check_signature(signature, _canonical(payload), trusted, label)
    assert signature is not None, "check_signature refuses an unsigned artifact"
    return signature


def load_artifact(
    path: str | os.PathLike[str],
    *,
    require_proved: bool = True,
    trusted_keys: KeySource | Iterable[KeySource] | None = None,
) -> Artifact:
    """Read and check the artifact at `path`; raises ArtifactError naming the first failing check.

    With ``require_proved=False`` an artifact whose certificate has
    unproved required entries still loads (for inspection and reports);
    the runtime keeps the default. `trusted_keys` (public key files
    KEY.pub or `certfsm._signing.PublicKey` values; None = no signature
    check) makes the artifact load only when a trusted key's Ed25519
    signature over its payload verifies; it needs the ``sign`` extra
    (SigningError naming it otherwise), as does a malformed key file.
    """
    label = os.fspath(path)
    trusted = None if trusted_keys is None else trusted_key_set(trusted_keys)
    data = _read(path, label)
    document = _parse(data, label)
    recorded, payload = _envelope(document, label)
    _check_hash(recorded, payload, label)
    _check_canonical(data, document, label)
    if trusted is not None:
        _check_signature(document, payload, label, trusted)
    artifact = _checked(payload, label, _RERUN, recorded, Path(label), signature_of(document, label))
    if require_proved:
        _check_certificate(artifact, label)
    return artifact


def build_artifact(payload: Mapping[str, Any]) -> bytes:
    """The artifact file's bytes for `payload` (numpy values allowed); refuses a payload the loader would refuse.

    Every check of `load_artifact` runs except the certificate's
    verdicts: an artifact with unproved entries can be written, and the
    runtime refuses it.
    """
    return _build(payload, "artifact payload")[0]


def write_artifact(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> str:
    """Write the artifact for `payload` to `path` atomically and return its SHA-256.

    The bytes go to a temporary file in the same folder, are flushed to
    disk and then renamed over `path`, so `path` holds either the old
    artifact or the complete new one, never a mix. Nothing is written when
    the payload is refused.
    """
    label = os.fspath(path)
    data, digest = _build(payload, f"{label} (not written)")
    write_atomically(
        Path(label), data, what="artifact", fix="choose a writable path for the artifact", make_parents=True
    )
    return digest


def _build(payload: Mapping[str, Any], label: str) -> tuple[bytes, str]:
    """The file's bytes and the payload's SHA-256, after the loader's structural checks."""
    if not isinstance(payload, Mapping):
        raise ArtifactError(f"{label}: the payload is a {type(payload).__name__}, expected a dict; {_FIX_PRODUCER}")
    try:
        body = _canonical(_plain(payload, ("payload",)))
    except ArtifactError as error:
        raise ArtifactError(f"{label}: {error}; {_FIX_PRODUCER}") from None
    plain = json.loads(body)
    digest = sha256_hex(body)
    _checked(plain, label, _FIX_PRODUCER, digest, None)
    return _canonical({"certfsm_artifact": ARTIFACT_FORMAT_VERSION, "sha256": digest, "payload": plain}), digest


def sign_artifact(path: str | os.PathLike[str], key: PrivateKey | str | os.PathLike[str]) -> ArtifactSignature:
    """Sign the artifact at `path` with `key` (a private key file or `certfsm._signing.PrivateKey`) and rewrite it.

    The artifact must pass every check of the loader except the
    certificate's verdicts (an uncertified artifact can be signed: the
    signature says who made it, and the runtime still refuses it); a
    previous signature is replaced. Only the top-level ``signature`` key
    is added, so the payload, its hash and its canonical bytes are
    unchanged. The file is rewritten atomically (`write_atomically`).
    """
    label = os.fspath(path)
    private = key if isinstance(key, PrivateKey) else load_private_key(key)
    data = _read(path, label)
    document = _parse(data, label)
    recorded, payload = _envelope(document, label)
    _check_hash(recorded, payload, label)
    _check_canonical(data, document, label)
    _checked(payload, label, _RERUN, recorded, Path(label))
    signature = ArtifactSignature(private.public.key_id, ALGORITHM, private.sign(_canonical(payload)))
    signed = {name: value for name, value in document.items() if name != SIGNATURE_KEY}
    signed[SIGNATURE_KEY] = signature.to_json()
    write_atomically(
        Path(label), _canonical(signed), what="signed artifact", fix="check that the artifact's folder is writable"
    )
    return signature
