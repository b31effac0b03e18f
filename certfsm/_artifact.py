"""The certified artifact: one canonical-JSON file (``.cfsm``) with a SHA-256 over its payload, and its loader.

Why canonical JSON: the same payload always gives the same bytes, so a
hash names a value rather than a formatting, and anything that can read
JSON can audit the file. The canonical form of a value is
``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
allow_nan=False)`` encoded as ASCII: no whitespace, object keys sorted,
non-ASCII text escaped as ``\\uXXXX``, integers in full, floats as Python's
``repr`` (the shortest text that reads back to the same float64), no NaN
or infinity. Parsing canonical bytes and writing them again gives the same
bytes, so a loader can recompute the hash from what it parsed.

Format version 1. The file is exactly ``canonical_bytes(document)``, no
trailing newline, where ``document = {"certfsm_artifact": 1, "sha256":
sha256_hex(canonical_bytes(payload)), "payload": payload}`` and the payload
holds (cells are numbered flat in C order over the inputs' bins: the last
input's bin varies fastest; output index k is the network's output k):

- ``spec``: ``ControllerSpec.to_json()`` of the spec the table was distilled from;
- ``model_sha256``: SHA-256 of the source ONNX file, 64 lowercase hex digits;
- ``grid``: ``{"edges": [[e0, ..., en] per input], "frac_bits": [f or null per input]}``,
  equal to the spec's edges and frac_bits;
- ``table``: ``{"proposal": [output index per cell], "status": "ec...",
  "allowed": [bitmask per cell]}``; ``status`` is one character per cell,
  ``e`` exact (the token is proved for the whole cell) or ``c``
  conservative (the cell holds the conservative token); bit k of
  ``allowed`` means output k may be emitted in that cell;
- ``machine``: ``{"conservative": k, "confirm_cycles": n >= 1,
  "cooldown_cycles": n >= 0, "overridable": [output indices, ascending],
  "codes": [4-bit code per output index, unique]}``, equal to the spec's;
- ``certificate``: ``[{"property": name, "engine": name, "verdict":
  "proved"|"violated"|"unknown", "seconds": s >= 0, "smt2": file name or
  null, "smt2_sha256": hex or null (null exactly when smt2 is), "required":
  true|false}, ...]``, property names unique, at least one required;
- ``created_by``: ``"certfsm <version>"``.

Loading runs these checks in order and refuses at the first failure with
one line naming the failing item and the fix: the file is readable; it is ASCII
JSON without NaN, infinities or repeated keys; the top-level keys and the
format version; the hash; the bytes are exactly the canonical form (a
reformatted file is refused even when its payload is intact); the
structure (types, ranges, lengths, the grid and machine agree with the
spec, every cell allows the conservative token and only legal tokens,
every proposal is allowed in its cell, every conservative cell holds the
conservative token); the certificate (every required entry proved). The
writer runs the same structural checks, so it cannot write what the
loader refuses (except for unproved entries: an uncertified artifact may
be written so that ``certfsm inspect`` can show why the runtime refuses it).

``certfsm/artifact.schema.json`` describes the same format for readers
outside certfsm (the tests check that whatever this loader accepts, the
schema accepts). This module does not use it: it needs only the standard
library and numpy, so an embedded target loads artifacts without onnx,
maraboupy, z3 or jsonschema.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ._errors import ArtifactError, CertfsmError, ReportError
from ._jsonpath import json_path


ARTIFACT_FORMAT_VERSION = 1
ARTIFACT_SUFFIX = ".cfsm"
VERDICTS = ("proved", "violated", "unknown")
MAX_FRAC_BITS = 24

_RERUN = "re-run certfsm distill"
_FIX_PRODUCER = "fix the code that built the payload: the loader would refuse this artifact"
_TOP_KEYS = ("certfsm_artifact", "payload", "sha256")
_PAYLOAD_KEYS = ("certificate", "created_by", "grid", "machine", "model_sha256", "spec", "table")
_ENTRY_KEYS = ("engine", "property", "required", "seconds", "smt2", "smt2_sha256", "verdict")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SMT2_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.smt2")


# ---------------------------------------------------------------- canonical JSON


def canonical_bytes(obj: Any) -> bytes:
    """The canonical JSON bytes of `obj` (see the module docstring); numpy scalars and arrays become plain JSON.

    Refuses, naming the JSON path, what would not read back as the same
    value: NaN, infinities, non-string object keys, other Python objects.
    """
    return _canonical(_plain(obj, ()))


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def _canonical(plain: Any) -> bytes:
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def _plain(value: Any, parts: tuple) -> Any:
    """`value` as plain JSON types (dict with str keys, list, str, int, finite float, bool, None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArtifactError(f"cannot write canonical JSON: {json_path(parts, 'the value')}={value!r} is not a finite number "
                                "(JSON has no NaN or Infinity); give a finite number")
        return float(value)
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArtifactError(f"cannot write canonical JSON: {json_path(parts, 'the value')} has the key {key!r} of type "
                                    f"{type(key).__name__}; JSON object keys are strings, convert it")
            result[key] = _plain(item, parts + (key,))
        return result
    if isinstance(value, (list, tuple)):
        return [item if type(item) in (int, str) else _plain(item, parts + (k,)) for k, item in enumerate(value)]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _plain(tolist(), parts)
    raise ArtifactError(f"cannot write canonical JSON: {json_path(parts, 'the value')} is of type {type(value).__name__}; "
                        "give numbers, strings, booleans, None, lists or dicts")


def _show(value: Any) -> str:
    """A JSON value as it appears in the file, cut to 60 characters."""
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    for kinds, name in ((type(None), "null"), (bool, "a boolean"), (int, "an integer"), (float, "a number"),
                        (str, "a string"), (list, "a list"), (dict, "an object")):
        if isinstance(value, kinds):
            return name
    return f"a {type(value).__name__}"


# ---------------------------------------------------------------- the loaded artifact


class _ReadOnlyDict(dict):
    """A dict that refuses changes, so a loaded artifact's spec stays as hashed; picklable, and still JSON."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("an artifact's spec is read-only; copy it with Artifact.payload()")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return (type(self), (dict(self),))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return _ReadOnlyDict((key, _freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


def _read_only(values, dtype, shape=None) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    if shape is not None:
        array = array.reshape(shape)
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class CertificateEntry:
    """One proof behind an artifact; `smt2` names its SMT-LIB file in the report folder (None when there is none)."""

    property: str
    engine: str
    verdict: str
    seconds: float
    smt2: str | None
    smt2_sha256: str | None
    required: bool

    @property
    def is_proved(self) -> bool:
        return self.verdict == "proved"


@dataclass(frozen=True, eq=False)
class Artifact:
    """A loaded, checked artifact; every array is read-only.

    `proposal` (output index), `exact` and `allowed` (bitmask over output
    indices) have one entry per cell, shaped by the inputs' bin counts
    (``reshape(-1)`` gives the flat C-order numbering of the file).
    `edges[i]` are input i's float64 bin edges. `spec` is the spec document
    as stored (read-only dicts and tuples). `path` is None for an artifact
    that was only built in memory.
    """

    path: Path | None
    sha256: str
    spec: Mapping[str, Any]
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
    certificate: tuple[CertificateEntry, ...]
    created_by: str

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
        return tuple(self.spec["outputs"])

    @property
    def unproved(self) -> tuple[CertificateEntry, ...]:
        """The required certificate entries that are not proved."""
        return tuple(entry for entry in self.certificate if entry.required and not entry.is_proved)

    @property
    def is_certified(self) -> bool:
        return not self.unproved

    def payload(self) -> dict[str, Any]:
        """The payload as plain JSON types; ``build_artifact(a.payload())`` gives back the file's bytes."""
        return {
            "spec": json.loads(json.dumps(self.spec)),
            "model_sha256": self.model_sha256,
            "grid": {"edges": [e.tolist() for e in self.edges], "frac_bits": list(self.frac_bits)},
            "table": {"proposal": self.proposal.reshape(-1).tolist(),
                      "status": "".join("e" if x else "c" for x in self.exact.reshape(-1).tolist()),
                      "allowed": self.allowed.reshape(-1).tolist()},
            "machine": {"conservative": self.conservative, "confirm_cycles": self.confirm_cycles,
                        "cooldown_cycles": self.cooldown_cycles, "overridable": list(self.overridable),
                        "codes": list(self.codes)},
            "certificate": [{"property": e.property, "engine": e.engine, "verdict": e.verdict, "seconds": e.seconds,
                             "smt2": e.smt2, "smt2_sha256": e.smt2_sha256, "required": e.required}
                            for e in self.certificate],
            "created_by": self.created_by,
        }


# ---------------------------------------------------------------- the checks, one stage each


class _Damaged(Exception):
    """Raised from inside json.loads by the hooks that refuse what canonical JSON never holds."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        key = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _Damaged(f"the key {key!r} appears twice in one object")
    return document


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Damaged(f"the number {text[:40]} overflows a float64")
    return value


def _no_constant(text: str) -> None:
    raise _Damaged(f"it holds {text}, which JSON does not allow")


def _read(path, label: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{label}: no such file (looked for {os.path.abspath(label)}); give the path of a "
                            f"{ARTIFACT_SUFFIX} artifact written by certfsm distill") from None
    except OSError as error:
        raise ArtifactError(f"{label}: cannot read the artifact ({error.strerror or error}); "
                            "check that the path names a readable file") from None
    if not data:
        raise ArtifactError(f"{label}: the file is empty (the write was interrupted or the file was truncated); "
                            f"{_RERUN}")
    return data


def _parse(data: bytes, label: str) -> Any:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as error:
        raise ArtifactError(f"{label}: byte {error.start} is 0x{data[error.start]:02x}, not ASCII, but an artifact "
                            f"is ASCII canonical JSON (the file is damaged); {_RERUN}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_repeats, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ArtifactError(f"{label}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg} "
                            f"(the file is damaged); {_RERUN}") from None
    except _Damaged as error:
        raise ArtifactError(f"{label}: not canonical JSON: {error} (the file is damaged); {_RERUN}") from None
    except (ValueError, RecursionError) as error:
        raise ArtifactError(f"{label}: not valid JSON: {str(error)[:80]} (the file is damaged); {_RERUN}") from None


def _envelope(document: Any, label: str) -> tuple[str, dict]:
    """The recorded hash and the payload, once the top level is an artifact of a format this code reads."""
    if not isinstance(document, dict) or "certfsm_artifact" not in document:
        what = "has no 'certfsm_artifact' key" if isinstance(document, dict) else f"is {_kind(document)}"
        raise ArtifactError(f"{label}: the top level {what}, so this is not a certfsm artifact; give a "
                            f"{ARTIFACT_SUFFIX} file written by certfsm distill")
    version = document["certfsm_artifact"]
    if type(version) is not int or version != ARTIFACT_FORMAT_VERSION:
        raise ArtifactError(f"{label}: certfsm_artifact={_show(version)} is not a format this certfsm reads "
                            f"(it reads format {ARTIFACT_FORMAT_VERSION}); {_RERUN} with this certfsm")
    for key in _TOP_KEYS:
        if key not in document:
            raise ArtifactError(f"{label}: the top-level key {key!r} is missing (the file is damaged); {_RERUN}")
    for key in document:
        if key not in _TOP_KEYS:
            raise ArtifactError(f"{label}: unknown top-level key {key!r} (format {ARTIFACT_FORMAT_VERSION} has only "
                                f"{', '.join(_TOP_KEYS)}); the artifact was modified after it was written; {_RERUN}")
    recorded, payload = document["sha256"], document["payload"]
    if not isinstance(recorded, str) or not _HEX64.fullmatch(recorded):
        raise ArtifactError(f"{label}: sha256={_show(recorded)} is not 64 lowercase hex digits "
                            f"(the file is damaged); {_RERUN}")
    if not isinstance(payload, dict):
        raise ArtifactError(f"{label}: payload is {_kind(payload)}, not an object (the file is damaged); {_RERUN}")
    return recorded, payload


def _check_hash(recorded: str, payload: dict, label: str) -> None:
    actual = sha256_hex(_canonical(payload))
    if actual != recorded:
        raise ArtifactError(f"{label}: sha256 mismatch: the payload hashes to {actual[:16]}... but the file records "
                            f"{recorded[:16]}...; the artifact was modified after it was written; {_RERUN}")


def _check_canonical(data: bytes, document: dict, label: str) -> None:
    expected = _canonical(document)
    if data != expected:
        at = next((k for k, (a, b) in enumerate(zip(data, expected)) if a != b), min(len(data), len(expected)))
        raise ArtifactError(f"{label}: the bytes are not the canonical form of their content (first difference at "
                            f"byte {at}), although the payload hash matches; the file was reformatted or edited "
                            f"after it was written; {_RERUN}")


def _check_certificate(artifact: Artifact, label: str) -> None:
    for index, entry in enumerate(artifact.certificate):
        if entry.required and not entry.is_proved:
            raise ArtifactError(f"{label}: certificate[{index}] {entry.property!r} has verdict {entry.verdict!r}, "
                                f"but the runtime needs it proved; {_RERUN} or fix the spec")


def _same_numbers(given: Any, edges: list) -> bool:
    return (isinstance(given, list) and len(given) == len(edges)
            and all(type(a) in (int, float) and a == b for a, b in zip(given, edges)))


class _Structure:
    """The structural checks of a parsed payload; `artifact()` returns the typed result or raises at the first failure.

    Order: the payload's keys, model_sha256, created_by, grid, machine,
    the spec against grid and machine, table, certificate. In the table:
    the three lengths, then each list's values, then the cells in order
    (at one cell: conservative token allowed, only legal tokens allowed,
    proposal allowed, conservative cell holds the conservative token).
    """

    def __init__(self, payload: Any, label: str, fix: str) -> None:
        self.payload, self.label, self.fix = payload, label, fix

    def fail(self, text: str) -> ArtifactError:
        return ArtifactError(f"{self.label}: {text}; {self.fix}")

    def obj(self, value: Any, where: str, keys: tuple[str, ...], *, only: bool = True) -> dict:
        if not isinstance(value, dict):
            raise self.fail(f"{where} is {_kind(value)}, expected an object with the keys {', '.join(keys)}")
        for key in keys:
            if key not in value:
                raise self.fail(f"{where}.{key} is missing")
        for key in value if only else ():
            if key not in keys:
                raise self.fail(f"{where}.{key} is not a field of artifact format {ARTIFACT_FORMAT_VERSION} "
                                f"(expected only {', '.join(keys)})")
        return value

    def items(self, value: Any, where: str, *, length: int | None = None, of: str = "", minimum: int = 0) -> list:
        if not isinstance(value, list):
            raise self.fail(f"{where} is {_kind(value)}, expected a list")
        if length is not None and len(value) != length:
            raise self.fail(f"{where} has {len(value)} entries but {of}")
        if len(value) < minimum:
            raise self.fail(f"{where} has {len(value)} entries, expected at least {minimum}")
        return value

    def integer(self, value: Any, where: str, low: int, high: int | None = None, what: str = "") -> int:
        if type(value) is not int or value < low or (high is not None and value > high):
            expected = what or (f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")
            raise self.fail(f"{where}={_show(value)} is not {expected}")
        return value

    def number(self, value: Any, where: str) -> float:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise self.fail(f"{where}={_show(value)} is not a finite number")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where}={_show(value)} is not a non-empty string")
        return value

    def digest(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not _HEX64.fullmatch(value):
            raise self.fail(f"{where}={_show(value)} is not a SHA-256 (64 lowercase hex digits)")
        return value

    def artifact(self, sha256: str, path: Path | None) -> Artifact:
        payload = self.obj(self.payload, "payload", _PAYLOAD_KEYS)
        model_sha256 = self.digest(payload["model_sha256"], "payload.model_sha256")
        created_by = self.text(payload["created_by"], "payload.created_by")
        if not created_by.startswith("certfsm "):
            raise self.fail(f"payload.created_by={_show(created_by)} does not start with 'certfsm '")
        edges, frac_bits = self.grid(payload["grid"])
        codes, conservative, confirm, cooldown, overridable = self.machine(payload["machine"])
        names, legal_mask = self.spec(payload["spec"], edges, frac_bits, codes, conservative, confirm, cooldown,
                                      overridable)
        shape = tuple(len(row) - 1 for row in edges)
        proposal, exact, allowed = self.table(payload["table"], shape, names, conservative, legal_mask)
        return Artifact(
            path=path, sha256=sha256, spec=_freeze(payload["spec"]), model_sha256=model_sha256,
            edges=tuple(_read_only(row, np.float64) for row in edges), frac_bits=tuple(frac_bits),
            proposal=proposal, exact=exact, allowed=allowed, conservative=conservative, confirm_cycles=confirm,
            cooldown_cycles=cooldown, overridable=tuple(overridable), codes=tuple(codes),
            certificate=self.certificate(payload["certificate"]), created_by=created_by,
        )

    def grid(self, grid: Any) -> tuple[list[list], list]:
        grid = self.obj(grid, "payload.grid", ("edges", "frac_bits"))
        rows = self.items(grid["edges"], "payload.grid.edges", minimum=1)
        for i, row in enumerate(rows):
            at = f"payload.grid.edges[{i}]"
            self.items(row, at, minimum=2)
            for k, value in enumerate(row):
                self.number(value, f"{at}[{k}]")
                if k and not value > row[k - 1]:
                    raise self.fail(f"{at}[{k}]={_show(value)} is not above {at}[{k - 1}]={_show(row[k - 1])}; "
                                    "bin edges are strictly increasing")
        bits = self.items(grid["frac_bits"], "payload.grid.frac_bits", length=len(rows),
                          of=f"payload.grid.edges has {len(rows)} inputs")
        for i, value in enumerate(bits):
            if value is not None:
                self.integer(value, f"payload.grid.frac_bits[{i}]", 0, MAX_FRAC_BITS,
                             f"null or an integer from 0 to {MAX_FRAC_BITS}")
        return rows, bits

    def machine(self, machine: Any) -> tuple[list[int], int, int, int, list[int]]:
        at = "payload.machine"
        machine = self.obj(machine, at, ("codes", "confirm_cycles", "conservative", "cooldown_cycles", "overridable"))
        codes = self.items(machine["codes"], f"{at}.codes", minimum=2)
        owner: dict[int, int] = {}
        for k, code in enumerate(codes):
            self.integer(code, f"{at}.codes[{k}]", 0, 15)
            if code in owner:
                raise self.fail(f"{at}.codes[{k}]={code} repeats {at}.codes[{owner[code]}]; "
                                "each output needs its own 4-bit code")
            owner[code] = k
        conservative = self.integer(machine["conservative"], f"{at}.conservative", 0, len(codes) - 1)
        confirm = self.integer(machine["confirm_cycles"], f"{at}.confirm_cycles", 1)
        cooldown = self.integer(machine["cooldown_cycles"], f"{at}.cooldown_cycles", 0)
        overridable = self.items(machine["overridable"], f"{at}.overridable")
        for j, index in enumerate(overridable):
            self.integer(index, f"{at}.overridable[{j}]", 0, len(codes) - 1)
            if j and not index > overridable[j - 1]:
                raise self.fail(f"{at}.overridable[{j}]={index} is not above {at}.overridable[{j - 1}]="
                                f"{overridable[j - 1]}; list output indices ascending, each once")
        return codes, conservative, confirm, cooldown, overridable

    def spec(self, spec: Any, edges, frac_bits, codes, conservative, confirm, cooldown,
             overridable) -> tuple[list[str], int]:
        """Check the spec's fields that grid and machine repeat; returns the token names and the legal-token mask."""
        at = "payload.spec"
        spec = self.obj(spec, at, ("certfsm_spec", "name", "inputs", "outputs", "tokens", "legal_tokens",
                                   "conservative_token", "hysteresis", "overrides"), only=False)
        if type(spec["certfsm_spec"]) is not int or spec["certfsm_spec"] != 1:
            raise self.fail(f"{at}.certfsm_spec={_show(spec['certfsm_spec'])} is not spec format 1")
        self.text(spec["name"], f"{at}.name")
        names = self.items(spec["outputs"], f"{at}.outputs", length=len(codes),
                           of=f"payload.machine.codes has {len(codes)}")
        index: dict[str, int] = {}
        for k, name in enumerate(names):
            self.text(name, f"{at}.outputs[{k}]")
            if name in index:
                raise self.fail(f"{at}.outputs[{k}]={_show(name)} repeats {at}.outputs[{index[name]}]; "
                                "token names are unique")
            index[name] = k
        tokens = self.obj(spec["tokens"], f"{at}.tokens", tuple(names))
        for k, name in enumerate(names):
            if type(tokens[name]) is not int or tokens[name] != codes[k]:
                raise self.fail(f"{at}.tokens.{name}={_show(tokens[name])} differs from payload.machine.codes[{k}]="
                                f"{codes[k]}; the machine must emit the spec's codes")
        if spec["conservative_token"] != names[conservative]:
            raise self.fail(f"{at}.conservative_token={_show(spec['conservative_token'])} differs from "
                            f"payload.machine.conservative={conservative} ({names[conservative]})")
        legal_mask = 0
        for k, name in enumerate(self.items(spec["legal_tokens"], f"{at}.legal_tokens")):
            if not isinstance(name, str) or name not in index:
                raise self.fail(f"{at}.legal_tokens[{k}]={_show(name)} is not one of {at}.outputs")
            legal_mask |= 1 << index[name]
        if not legal_mask >> conservative & 1:
            raise self.fail(f"the conservative token {names[conservative]} is not in {at}.legal_tokens")
        inputs = self.items(spec["inputs"], f"{at}.inputs", length=len(edges),
                            of=f"payload.grid.edges has {len(edges)} inputs")
        for i, item in enumerate(inputs):
            where = f"{at}.inputs[{i}]"
            item = self.obj(item, where, ("edges",), only=False)
            if not _same_numbers(item["edges"], edges[i]):
                raise self.fail(f"{where}.edges differs from payload.grid.edges[{i}]; the grid must be the spec's "
                                "bin edges")
            given = item.get("frac_bits")
            if given != frac_bits[i] or type(given) is not type(frac_bits[i]):
                raise self.fail(f"{where}.frac_bits={_show(given)} differs from payload.grid.frac_bits[{i}]="
                                f"{_show(frac_bits[i])}")
        hysteresis = self.obj(spec["hysteresis"], f"{at}.hysteresis", ("confirm_cycles", "cooldown_cycles"),
                              only=False)
        for key, value in (("confirm_cycles", confirm), ("cooldown_cycles", cooldown)):
            if type(hysteresis[key]) is not int or hysteresis[key] != value:
                raise self.fail(f"{at}.hysteresis.{key}={_show(hysteresis[key])} differs from "
                                f"payload.machine.{key}={value}")
        overrides = self.obj(spec["overrides"], f"{at}.overrides", ("overridable",), only=False)
        expected = [names[k] for k in overridable]
        if overrides["overridable"] != expected:
            raise self.fail(f"{at}.overrides.overridable={_show(overrides['overridable'])} differs from "
                            f"payload.machine.overridable={overridable} ({', '.join(expected) or 'none'})")
        for k in overridable:
            if not legal_mask >> k & 1:
                raise self.fail(f"payload.machine.overridable lists {names[k]} (output {k}), which is not in "
                                f"{at}.legal_tokens; an override may force only legal tokens")
        return names, legal_mask

    def table(self, table: Any, shape: tuple[int, ...], names: list[str], conservative: int,
              legal_mask: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = "payload.table"
        n_cells, n_outputs = math.prod(shape), len(names)
        table = self.obj(table, at, ("allowed", "proposal", "status"))
        grid = f"the grid has {n_cells} cells"
        proposal = self.items(table["proposal"], f"{at}.proposal", length=n_cells, of=grid)
        status = table["status"]
        if not isinstance(status, str):
            raise self.fail(f"{at}.status is {_kind(status)}, expected a string of one 'e' or 'c' per cell")
        if len(status) != n_cells:
            raise self.fail(f"{at}.status has {len(status)} characters but {grid}")
        allowed = self.items(table["allowed"], f"{at}.allowed", length=n_cells, of=grid)
        for k, value in enumerate(proposal):
            if type(value) is not int or not 0 <= value < n_outputs:
                self.integer(value, f"{at}.proposal[{k}]", 0, n_outputs - 1, f"an output index 0..{n_outputs - 1}")
        wrong = re.search(r"[^ec]", status)
        if wrong:
            raise self.fail(f"{at}.status[{wrong.start()}]={wrong.group()!r} is neither 'e' (exact) nor "
                            "'c' (conservative)")
        full = (1 << n_outputs) - 1
        for k, value in enumerate(allowed):
            if type(value) is not int or not 0 <= value <= full:
                self.integer(value, f"{at}.allowed[{k}]", 0, full,
                             f"a bitmask over {n_outputs} outputs (an integer from 0 to {full})")
        chosen = _read_only(proposal, np.int64, shape)
        masks = _read_only(allowed, np.int64, shape)
        exact = _read_only(np.frombuffer(status.encode("ascii"), dtype=np.uint8) == ord("e"), bool, shape)
        self.cells(chosen.reshape(-1), masks.reshape(-1), exact.reshape(-1), shape, names, conservative, legal_mask)
        return chosen, exact, masks

    def cells(self, chosen, masks, exact, shape, names, conservative, legal_mask) -> None:
        at = "payload.table"

        def cell(k: int) -> str:
            return f"cell {k} (bins {', '.join(str(int(b)) for b in np.unravel_index(k, shape))})"

        def tokens(mask: int) -> str:
            return ", ".join(name for i, name in enumerate(names) if mask >> i & 1) or "none"

        def token(k: int) -> str:
            return f"{int(chosen[k])} ({names[int(chosen[k])]})"

        problems = (
            ((masks >> conservative) & 1 == 0,
             lambda k: f"{at}.allowed[{k}]={int(masks[k])} does not allow the conservative token "
                       f"{names[conservative]} in {cell(k)}; the fallback must be allowed in every cell"),
            (masks & ~legal_mask != 0,
             lambda k: f"{at}.allowed[{k}]={int(masks[k])} allows {tokens(int(masks[k]) & ~legal_mask)} in "
                       f"{cell(k)}, which payload.spec.legal_tokens does not list; a cell allows only legal tokens"),
            ((masks >> chosen) & 1 == 0,
             lambda k: f"{at}.proposal[{k}]={token(k)} is not allowed in {cell(k)} (allowed there: "
                       f"{tokens(int(masks[k]))}); the table may propose only an allowed token"),
            (~exact & (chosen != conservative),
             lambda k: f"{at}.proposal[{k}]={token(k)} in {cell(k)}, whose status is 'c' (conservative); a "
                       f"conservative cell holds the conservative token {conservative} ({names[conservative]})"),
        )
        first = None
        for failing, message in problems:
            hits = np.flatnonzero(failing)
            if hits.size and (first is None or hits[0] < first[0]):
                first = (int(hits[0]), message)
        if first is not None:
            raise self.fail(first[1](first[0]))

    def certificate(self, certificate: Any) -> tuple[CertificateEntry, ...]:
        entries = self.items(certificate, "payload.certificate", minimum=1)
        result, seen = [], {}
        for j, entry in enumerate(entries):
            at = f"payload.certificate[{j}]"
            entry = self.obj(entry, at, _ENTRY_KEYS)
            name = self.text(entry["property"], f"{at}.property")
            if name in seen:
                raise self.fail(f"{at}.property={_show(name)} repeats payload.certificate[{seen[name]}]; "
                                "list each property once")
            seen[name] = j
            engine = self.text(entry["engine"], f"{at}.engine")
            if entry["verdict"] not in VERDICTS:
                raise self.fail(f"{at}.verdict={_show(entry['verdict'])} is not one of {', '.join(VERDICTS)}")
            seconds = self.number(entry["seconds"], f"{at}.seconds")
            if seconds < 0:
                raise self.fail(f"{at}.seconds={_show(seconds)} is negative")
            smt2, digest = entry["smt2"], entry["smt2_sha256"]
            if smt2 is not None and (not isinstance(smt2, str) or not _SMT2_NAME.fullmatch(smt2)):
                raise self.fail(f"{at}.smt2={_show(smt2)} is neither null nor a plain .smt2 file name (letters, "
                                "digits, '_', '.', '-'; no folders)")
            if smt2 is None and digest is not None:
                raise self.fail(f"{at}.smt2_sha256 is set but {at}.smt2 is null; give both or neither")
            if smt2 is not None:
                self.digest(digest, f"{at}.smt2_sha256")
            if type(entry["required"]) is not bool:
                raise self.fail(f"{at}.required={_show(entry['required'])} is not true or false")
            result.append(CertificateEntry(name, engine, entry["verdict"], seconds, smt2, digest, entry["required"]))
        if not any(entry.required for entry in result):
            raise self.fail("payload.certificate has no entry with required=true, so no proof backs the artifact")
        return tuple(result)


# ---------------------------------------------------------------- public entry points


def load_artifact(path: str | os.PathLike, *, require_proved: bool = True) -> Artifact:
    """Read and check the artifact at `path`; raises ArtifactError naming the first failing check.

    With ``require_proved=False`` an artifact whose certificate has
    unproved required entries still loads (for inspection and reports);
    the runtime keeps the default.
    """
    label = os.fspath(path)
    data = _read(path, label)
    document = _parse(data, label)
    recorded, payload = _envelope(document, label)
    _check_hash(recorded, payload, label)
    _check_canonical(data, document, label)
    artifact = _Structure(payload, label, _RERUN).artifact(recorded, Path(label))
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


def write_artifact(path: str | os.PathLike, payload: Mapping[str, Any]) -> str:
    """Write the artifact for `payload` to `path` atomically and return its SHA-256.

    The bytes go to a temporary file in the same folder, are flushed to
    disk and then renamed over `path`, so `path` holds either the old
    artifact or the complete new one, never a mix. Nothing is written when
    the payload is refused.
    """
    label = os.fspath(path)
    data, digest = _build(payload, f"{label} (not written)")
    target = Path(label)
    temporary = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException as error:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise ReportError(f"{label}: cannot write the artifact ({error.strerror or error}); "
                              "choose a writable --out path") from error
        raise
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
    _Structure(plain, label, _FIX_PRODUCER).artifact(digest, None)
    return _canonical({"certfsm_artifact": ARTIFACT_FORMAT_VERSION, "sha256": digest, "payload": plain}), digest


@dataclass(frozen=True)
class Smt2Check:
    """One certificate entry's SMT-LIB file compared with the hash the certificate records; `found` None = missing."""

    index: int
    property: str
    file: str
    expected: str
    found: str | None

    @property
    def is_match(self) -> bool:
        return self.found == self.expected

    def describe(self) -> str:
        if self.found is None:
            return f"certificate[{self.index}] {self.property!r}: {self.file} is missing"
        if not self.is_match:
            return (f"certificate[{self.index}] {self.property!r}: {self.file} hashes to {self.found[:16]}... but "
                    f"the certificate records {self.expected[:16]}...")
        return f"certificate[{self.index}] {self.property!r}: {self.file} matches"


def verify_smt2_files(artifact: Artifact, folder: str | os.PathLike) -> tuple[Smt2Check, ...]:
    """Hash each .smt2 file the certificate names in the report `folder` (entries without a file are skipped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such report folder; give the folder certfsm distill wrote with --report")
    checks = []
    for index, entry in enumerate(artifact.certificate):
        if entry.smt2 is None:
            continue
        try:
            found = sha256_hex((folder / entry.smt2).read_bytes())
        except OSError:
            found = None
        checks.append(Smt2Check(index, entry.property, entry.smt2, entry.smt2_sha256, found))
    return tuple(checks)


@dataclass(frozen=True)
class Check:
    """One step of an inspection: `passed` is True, False, or None when an earlier failure kept it from running."""

    name: str
    passed: bool | None
    detail: str


@dataclass(frozen=True)
class Inspection:
    """What `inspect_artifact` found: summary lines (iterating yields them), each check, the artifact if it parsed.

    `is_ok` holds only when every check ran and passed (file, JSON, format,
    hash, canonical form, structure, certificate and, when a report folder
    was given, its .smt2 files); the CLI exits 0 exactly then.
    """

    lines: tuple[str, ...]
    checks: tuple[Check, ...]
    artifact: Artifact | None

    @property
    def is_ok(self) -> bool:
        return all(check.passed for check in self.checks)

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)


def inspect_artifact(path: str | os.PathLike, *, report: str | os.PathLike | None = None) -> Inspection:
    """Summarise the artifact at `path` and run every check that can run; never raises for a bad artifact.

    Unlike `load_artifact`, a failed hash or canonical-form check does not
    stop the later checks, so a person sees what is inside a modified file
    and everything else that is wrong with it. With `report`, the .smt2
    files of that report folder are compared with the certificate too.
    """
    label = os.fspath(path)
    names = ["file", "JSON", "format", "sha256", "canonical form", "structure", "certificate"]
    checks: list[Check] = []
    extra: list[str] = []

    def attempt(name: str, step, detail) -> tuple[bool, Any]:
        try:
            value = step()
        except CertfsmError as error:
            checks.append(Check(name, False, str(error)))
            return False, None
        checks.append(Check(name, True, detail(value) if callable(detail) else detail))
        return True, value

    artifact = None
    ok, data = attempt("file", lambda: _read(path, label), lambda d: f"{len(d)} bytes read")
    if ok:
        ok, document = attempt("JSON", lambda: _parse(data, label), "ASCII JSON, finite numbers, no repeated keys")
    if ok:
        ok, envelope = attempt("format", lambda: _envelope(document, label),
                               f"certfsm artifact format {ARTIFACT_FORMAT_VERSION}")
    if ok:
        recorded, payload = envelope
        attempt("sha256", lambda: _check_hash(recorded, payload, label), f"the payload hashes to {recorded}")
        attempt("canonical form", lambda: _check_canonical(data, document, label),
                "the bytes are exactly the canonical form of their content")
        ok, artifact = attempt("structure", lambda: _Structure(payload, label, _RERUN).artifact(recorded, Path(label)),
                               "types, ranges, lengths and cross-references are consistent")
    if ok:
        attempt("certificate", lambda: _check_certificate(artifact, label),
                f"every required entry is proved ({sum(e.required for e in artifact.certificate)} required)")
    if report is not None:
        names.append("smt2 files")
        if artifact is not None:
            try:
                files = verify_smt2_files(artifact, report)
            except CertfsmError as error:
                checks.append(Check("smt2 files", False, str(error)))
            else:
                bad = [f for f in files if not f.is_match]
                text = (f"{len(files) - len(bad)} of {len(files)} .smt2 files in {os.fspath(report)} match the "
                        "certificate")
                checks.append(Check("smt2 files", not bad, text + (f"; {bad[0].describe()}" if bad else "")))
                extra = [f"  {f.describe()}" for f in files]
    done = {check.name for check in checks}
    checks += [Check(name, None, "not run: an earlier check failed") for name in names if name not in done]
    lines = _summary(artifact, label, len(data)) if artifact is not None else [f"artifact: {label}"]
    if extra:
        lines += [f"smt2 files in {os.fspath(report)}:"] + extra
    lines.append("checks:")
    marks = {True: "ok", False: "FAILED", None: "not run"}
    lines += [f"  {marks[check.passed]:<8}{check.name}: {check.detail}" for check in checks]
    failed = next((check.name for check in checks if not check.passed), None)
    lines.append("verdict: ok: every check passed, the artifact is certified" if failed is None
                 else f"verdict: FAILED: the {failed} check did not pass")
    return Inspection(tuple(lines), tuple(checks), artifact)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _summary(artifact: Artifact, label: str, size: int) -> list[str]:
    spec, names = artifact.spec, artifact.token_names
    lines = [f"artifact: {label} ({size} bytes, format {ARTIFACT_FORMAT_VERSION}, written by {artifact.created_by})",
             f"controller: {spec['name']}, decision {spec.get('decision', 'not stated')}",
             f"model sha256: {artifact.model_sha256}", f"payload sha256: {artifact.sha256}",
             f"inputs ({artifact.n_inputs}):"]
    for i, (edges, bits) in enumerate(zip(artifact.edges, artifact.frac_bits)):
        item = spec["inputs"][i]
        name = item.get("name", f"X_{i}") if isinstance(item, Mapping) else f"X_{i}"
        fixed = "" if bits is None else f", frac_bits {bits}"
        lines.append(f"  {name}: {len(edges) - 1} bins over [{_number(edges[0])}, {_number(edges[-1])}]{fixed}")
    n_cells, n_exact = artifact.n_cells, int(artifact.exact.sum())
    lines.append(f"grid: {' x '.join(map(str, artifact.shape))} = {n_cells} cells: {n_exact} exact "
                 f"({100 * n_exact / n_cells:.1f}%), {n_cells - n_exact} conservative")
    proposed = np.bincount(artifact.proposal.reshape(-1), minlength=artifact.n_outputs)
    legal = set(spec["legal_tokens"])
    lines.append("outputs (index: token = 4-bit code):")
    for k, name in enumerate(names):
        tags = [tag for tag, holds in (("conservative", k == artifact.conservative),
                                       ("overridable", k in artifact.overridable),
                                       ("not legal", name not in legal)) if holds]
        lines.append(f"  {k}: {name} = {artifact.codes[k]}{' (' + ', '.join(tags) + ')' if tags else ''}, "
                     f"proposed in {int(proposed[k])} cells")
    lines.append(f"machine: confirm {artifact.confirm_cycles} cycles, cooldown {artifact.cooldown_cycles} cycles, "
                 f"overridable: {', '.join(names[k] for k in artifact.overridable) or 'none'}")
    lines.append(f"certificate ({len(artifact.certificate)} {'entry' if len(artifact.certificate) == 1 else 'entries'}"
                 f", {sum(e.required for e in artifact.certificate)} required):")
    for j, entry in enumerate(artifact.certificate):
        where = f", {entry.smt2} (sha256 {entry.smt2_sha256[:16]}...)" if entry.smt2 else ", no SMT-LIB file"
        lines.append(f"  [{j}] {entry.property}: {entry.verdict} by {entry.engine} in {entry.seconds:.3f} s"
                     f"{', required' if entry.required else ''}{where}")
    return lines
