"""The loader's reading of an artifact payload: parsed JSON in, typed and checked values out.

This is the loader's own reading of the format described in
`certfsm._artifact`, written apart from the writer
(`certfsm._artifact_payload`): it imports nothing of it, so that an
encoding rule stated wrongly on one side shows up as a refusal or as a
decoded value that differs from what was written (tests/core/
test_artifact_round_trip.py), instead of passing on both sides.

Order: the payload's keys, model_sha256, created_by, grid, machine, the
spec against grid and machine (`certfsm._artifact_spec`), table
(`certfsm._artifact_table`), a refined table's trees
(`certfsm._artifact_refinement`), certificate, and last the written form of
the numbers that have two (an edge 0 where certfsm writes 0.0). The first
failure raises one ArtifactError.

Standard library and numpy only, like every module an artifact loader
imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._arrays import frozen_array
from ._artifact_checks import MAX_FRAC_BITS, PayloadChecks, _show
from ._artifact_refinement import read_refinement
from ._artifact_spec import read_spec
from ._artifact_table import read_table
from ._box_tree import Refinement
from ._jsonpath import json_path
from ._stored_spec import StoredSpec
from ._verdict import CERTIFICATE_ENTRY_KEYS, PROOF_CERTIFICATE_KEYS, VERDICTS, VerdictRecord

_PAYLOAD_KEYS = ("certificate", "created_by", "grid", "machine", "model_sha256", "spec", "table")
_SMT2_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.smt2")
_PROOF_CERTIFICATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.cert\.json")

Edges = list[list[float]]
"""The grid's bin edges as read: one list of JSON numbers per input."""


@dataclass(frozen=True, eq=False)
class PayloadReading:
    """What the loader read from a payload, under the field names of `certfsm.Artifact` (all but path, sha256 and
    signature); every array is read-only and `spec` is the payload's spec document as given."""

    spec: dict[str, Any]
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
    refinement: Refinement | None


def read_payload(payload: Any, label: str, fix: str) -> PayloadReading:
    """The typed values of a parsed `payload`, or ArtifactError ``label: <the first failure>; fix``."""
    checks = PayloadChecks(label, fix)
    payload = checks.obj(payload, "payload", _PAYLOAD_KEYS)
    model_sha256 = checks.digest(payload["model_sha256"], "payload.model_sha256")
    created_by = checks.text(payload["created_by"], "payload.created_by")
    if not created_by.startswith("certfsm "):
        raise checks.fail(f"payload.created_by={_show(created_by)} does not start with 'certfsm '")
    edges, frac_bits = _read_grid(checks, payload["grid"])
    codes, conservative, confirm, cooldown, overridable = _read_machine(checks, payload["machine"])
    stored_spec = read_spec(
        checks, payload["spec"], edges, frac_bits, codes, conservative, confirm, cooldown, overridable
    )
    proposal, exact, allowed = read_table(checks, payload["table"], edges, stored_spec)
    table = payload["table"]
    refinement = (
        read_refinement(checks, table["refinement"], edges, frac_bits, stored_spec, exact)
        if "refinement" in table
        else None
    )
    certificate = _read_certificate(checks, payload["certificate"])
    _check_written_form(checks, edges)
    return PayloadReading(
        spec=payload["spec"],
        stored_spec=stored_spec,
        model_sha256=model_sha256,
        edges=tuple(frozen_array(row, np.float64) for row in edges),
        frac_bits=tuple(frac_bits),
        proposal=proposal,
        exact=exact,
        allowed=allowed,
        conservative=conservative,
        confirm_cycles=confirm,
        cooldown_cycles=cooldown,
        overridable=tuple(overridable),
        codes=tuple(codes),
        certificate=certificate,
        created_by=created_by,
        refinement=refinement,
    )


def _read_grid(checks: PayloadChecks, grid: Any) -> tuple[Edges, list[int | None]]:
    grid = checks.obj(grid, "payload.grid", ("edges", "frac_bits"))
    rows = checks.items(grid["edges"], "payload.grid.edges", minimum=1)
    for i, row in enumerate(rows):
        at = f"payload.grid.edges[{i}]"
        checks.items(row, at, minimum=2)
        for k, value in enumerate(row):
            checks.number(value, f"{at}[{k}]")
            if k and not value > row[k - 1]:
                raise checks.fail(
                    f"{at}[{k}]={_show(value)} is not above {at}[{k - 1}]={_show(row[k - 1])}; "
                    "bin edges are strictly increasing"
                )
    bits = checks.items(
        grid["frac_bits"],
        "payload.grid.frac_bits",
        length=len(rows),
        of=f"payload.grid.edges has {len(rows)} inputs",
    )
    for i, value in enumerate(bits):
        if value is not None:
            checks.integer(
                value,
                f"payload.grid.frac_bits[{i}]",
                0,
                MAX_FRAC_BITS,
                f"null or an integer from 0 to {MAX_FRAC_BITS}",
            )
    return rows, bits


def _read_machine(checks: PayloadChecks, machine: Any) -> tuple[list[int], int, int, int, list[int]]:
    at = "payload.machine"
    machine = checks.obj(machine, at, ("codes", "confirm_cycles", "conservative", "cooldown_cycles", "overridable"))
    codes = checks.items(machine["codes"], f"{at}.codes", minimum=2)
    owner: dict[int, int] = {}
    for k, code in enumerate(codes):
        checks.integer(code, f"{at}.codes[{k}]", 0, 15)
        if code in owner:
            raise checks.fail(
                f"{at}.codes[{k}]={code} repeats {at}.codes[{owner[code]}]; each output needs its own 4-bit code"
            )
        owner[code] = k
    conservative = checks.integer(machine["conservative"], f"{at}.conservative", 0, len(codes) - 1)
    confirm = checks.integer(machine["confirm_cycles"], f"{at}.confirm_cycles", 1)
    cooldown = checks.integer(machine["cooldown_cycles"], f"{at}.cooldown_cycles", 0)
    overridable = checks.items(machine["overridable"], f"{at}.overridable")
    for j, index in enumerate(overridable):
        checks.integer(index, f"{at}.overridable[{j}]", 0, len(codes) - 1)
        if j and not index > overridable[j - 1]:
            raise checks.fail(
                f"{at}.overridable[{j}]={index} is not above {at}.overridable[{j - 1}]="
                f"{overridable[j - 1]}; list output indices ascending, each once"
            )
    return codes, conservative, confirm, cooldown, overridable


def _proof_certificate(checks: PayloadChecks, entry: dict[str, Any], at: str) -> tuple[str | None, str | None]:
    """An entry's optional proof certificate file name and SHA-256 (`PROOF_CERTIFICATE_KEYS`), both or neither."""
    present = [key in entry for key in PROOF_CERTIFICATE_KEYS]
    if not any(present):
        return None, None
    if not all(present):
        missing = PROOF_CERTIFICATE_KEYS[present.index(False)]
        raise checks.fail(f"{at}.{missing} is missing; give proof_certificate and proof_certificate_sha256 together")
    name = entry["proof_certificate"]
    if not isinstance(name, str) or not _PROOF_CERTIFICATE_NAME.fullmatch(name):
        raise checks.fail(
            f"{at}.proof_certificate={_show(name)} is not a plain .cert.json file name (letters, digits, '_', '.', "
            "'-'; no folders)"
        )
    checks.digest(entry["proof_certificate_sha256"], f"{at}.proof_certificate_sha256")
    return name, entry["proof_certificate_sha256"]


def _read_certificate(checks: PayloadChecks, certificate: Any) -> tuple[VerdictRecord, ...]:
    entries = checks.items(certificate, "payload.certificate", minimum=1)
    result: list[VerdictRecord] = []
    seen: dict[str, int] = {}
    for j, entry in enumerate(entries):
        at = f"payload.certificate[{j}]"
        entry = checks.obj(entry, at, CERTIFICATE_ENTRY_KEYS, optional=PROOF_CERTIFICATE_KEYS)
        name = checks.text(entry["property"], f"{at}.property")
        if name in seen:
            raise checks.fail(
                f"{at}.property={_show(name)} repeats payload.certificate[{seen[name]}]; list each property once"
            )
        seen[name] = j
        engine = checks.text(entry["engine"], f"{at}.engine")
        if entry["verdict"] not in VERDICTS:
            raise checks.fail(f"{at}.verdict={_show(entry['verdict'])} is not one of {', '.join(VERDICTS)}")
        smt2, digest = entry["smt2"], entry["smt2_sha256"]
        if smt2 is not None and (not isinstance(smt2, str) or not _SMT2_NAME.fullmatch(smt2)):
            raise checks.fail(
                f"{at}.smt2={_show(smt2)} is neither null nor a plain .smt2 file name (letters, "
                "digits, '_', '.', '-'; no folders)"
            )
        if smt2 is None and digest is not None:
            raise checks.fail(f"{at}.smt2_sha256 is set but {at}.smt2 is null; give both or neither")
        if smt2 is not None:
            checks.digest(digest, f"{at}.smt2_sha256")
        if type(entry["required"]) is not bool:
            raise checks.fail(f"{at}.required={_show(entry['required'])} is not true or false")
        proof, proof_digest = _proof_certificate(checks, entry, at)
        result.append(
            VerdictRecord(
                entry["verdict"],
                engine,
                property=name,
                smt2=smt2,
                smt2_sha256=digest,
                required=entry["required"],
                proof_certificate=proof,
                proof_certificate_sha256=proof_digest,
            )
        )
    if not any(record.required for record in result):
        raise checks.fail("payload.certificate has no entry with required=true, so no proof backs the artifact")
    return tuple(result)


def _check_written_form(checks: PayloadChecks, edges: Edges) -> None:
    """Refuse a number written in a form certfsm never writes although it decodes to a value (the edge 0 for 0.0).

    Every other field has one form per value (strings, integers, booleans
    and null, and the spec, kept as written); bin edges are float64 and
    written as floats. Otherwise two files with two hashes would decode to
    one artifact, and the hash would no longer name what the runtime runs.
    """
    for i, row in enumerate(edges):
        for k, value in enumerate(row):
            if type(value) is not float:
                where = json_path(("payload", "grid", "edges", i, k), "the payload")
                raise checks.fail(
                    f"{where}={_show(value)} is not what certfsm writes for the value it decodes to "
                    f"({_show(float(value))}; the artifact was modified after it was written)"
                )
