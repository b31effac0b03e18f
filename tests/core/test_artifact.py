"""The certified artifact: round trip, and one pinned refusal per kind of damage or inconsistency."""

from __future__ import annotations

import copy
import functools
import importlib.resources
import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._artifact import Artifact, build_artifact, load_artifact, write_artifact
from certfsm._artifact_checks import ARTIFACT_FORMAT_VERSION
from certfsm._artifact_trust import required_properties
from certfsm._canonical import canonical_bytes, sha256_hex
from certfsm._errors import ArtifactError, CertfsmError, ReportError
from certfsm import spec_from_dict

# Two inputs x three bins, three outputs; TURBO is forbidden where b >= 20 (the cells of b's last bin).
SPEC = spec_from_dict(
    {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": [
            {"name": "a", "unit": "%", "min": 0, "max": 3, "bins": 3, "frac_bits": 4},
            {"name": "b", "unit": "degC", "min": 0, "max": 30, "edges": [0, 10, 20, 30]},
        ],
        "outputs": ["KEEP", "FAST", "TURBO"],
        "tokens": {"KEEP": 0, "FAST": 5, "TURBO": 9},
        "legal_tokens": ["KEEP", "FAST", "TURBO"],
        "decision": "argmax",
        "conservative_token": "KEEP",
        "legality_rules": [{"name": "no-turbo-when-hot", "when": {"b": {"min": 20}}, "forbid": ["TURBO"]}],
        "hysteresis": {"confirm_cycles": 3, "cooldown_cycles": 8},
        "overrides": {"overridable": ["KEEP", "FAST"]},
    },
    "/certfsm-test/spec.json",
    require_model=False,
).to_json()

SMT_A, SMT_B = b"(set-info :status unsat)\n(check-sat)\n", b"(set-info :status unsat)\n(assert false)\n(check-sat)\n"

# Cell k = 3 * bin(a) + bin(b); cells 2, 5 and 8 (b >= 20) do not allow TURBO (bit 2); cell 6 is conservative.
PAYLOAD = {
    "spec": SPEC,
    "model_sha256": sha256_hex(b"the onnx model"),
    "grid": {"edges": [[0.0, 1.0, 2.0, 3.0], [0.0, 10.0, 20.0, 30.0]], "frac_bits": [4, None]},
    "table": {"proposal": [0, 1, 1, 2, 2, 0, 0, 0, 1], "status": "eeeeeecee", "allowed": [7, 7, 3, 7, 7, 3, 7, 7, 3]},
    "machine": {
        "conservative": 0,
        "confirm_cycles": 3,
        "cooldown_cycles": 8,
        "overridable": [0, 1],
        "codes": [0, 5, 9],
    },
    "certificate": [
        {
            "property": "table-tokens",
            "engine": "z3",
            "verdict": "proved",
            "smt2": "table-tokens.smt2",
            "smt2_sha256": sha256_hex(SMT_A),
            "required": True,
        },
        {
            "property": "machine-switch-cooldown",
            "engine": "z3",
            "verdict": "proved",
            "smt2": "machine-switch-cooldown.smt2",
            "smt2_sha256": sha256_hex(SMT_B),
            "required": True,
        },
        {
            "property": "cells-exact",
            "engine": "bounds+z3",
            "verdict": "proved",
            "smt2": None,
            "smt2_sha256": None,
            "required": True,
        },
    ]
    + [
        {
            "property": name,
            "engine": "explicit" if name.startswith("enumeration-") else "z3",
            "verdict": "proved",
            "smt2": None,
            "smt2_sha256": None,
            "required": True,
        }
        for name in required_properties()
        if name not in ("table-tokens", "machine-switch-cooldown", "cells-exact")
    ],
    "created_by": "certfsm 0.1.0",
}


def payload(**changes):
    document = copy.deepcopy(PAYLOAD)
    document.update(changes)
    return document


def forge(path, document):
    """Write `document` as an artifact with a correct hash, bypassing the writer's checks (a buggy producer)."""
    path.write_bytes(
        canonical_bytes(
            {
                "certfsm_artifact": ARTIFACT_FORMAT_VERSION,
                "sha256": sha256_hex(canonical_bytes(document)),
                "payload": document,
            }
        )
    )
    return path


@pytest.fixture
def artifact_path(tmp_path):
    path = tmp_path / "CONTROLLER.cfsm"
    write_artifact(path, PAYLOAD)
    return path


def refusal(path, text):
    """The anchored pattern of a load refusal: the file name, `text` (a regex), then the fix."""
    return rf"^{re.escape(str(path))}: {text}; re-run certfsm distill$"


# ---------------------------------------------------------------- writing and loading


def test_written_artifact_loads_with_typed_fields(artifact_path):
    artifact = load_artifact(artifact_path)
    assert isinstance(artifact, Artifact) and artifact.path == artifact_path
    assert artifact.shape == (3, 3) and artifact.n_cells == 9 and (artifact.n_inputs, artifact.n_outputs) == (2, 3)
    assert artifact.token_names == ("KEEP", "FAST", "TURBO") and artifact.codes == (0, 5, 9)
    assert artifact.proposal.dtype == np.int64 and artifact.proposal.tolist() == [[0, 1, 1], [2, 2, 0], [0, 0, 1]]
    assert artifact.exact.dtype == bool and artifact.exact.reshape(-1).tolist() == [True] * 6 + [False] + [True] * 2
    assert artifact.allowed[1, 2] == 3 and artifact.allowed[2, 0] == 7
    assert [e.tolist() for e in artifact.edges] == PAYLOAD["grid"]["edges"] and artifact.frac_bits == (4, None)
    assert (artifact.conservative, artifact.confirm_cycles, artifact.cooldown_cycles) == (0, 3, 8)
    assert artifact.overridable == (0, 1)
    assert [(e.property, e.verdict, e.required) for e in artifact.certificate][:3] == [
        ("table-tokens", "proved", True),
        ("machine-switch-cooldown", "proved", True),
        ("cells-exact", "proved", True),
    ]
    assert sorted(e.property for e in artifact.certificate) == sorted(required_properties())
    assert artifact.is_certified and artifact.unproved == ()
    assert artifact.model_sha256 == PAYLOAD["model_sha256"] and artifact.created_by == "certfsm 0.1.0"
    assert artifact.spec["hysteresis"]["cooldown_cycles"] == 8


def test_round_trip_gives_back_the_same_bytes_and_hash(artifact_path):
    data = artifact_path.read_bytes()
    artifact = load_artifact(artifact_path)
    assert artifact.payload() == PAYLOAD
    assert build_artifact(artifact.payload()) == data == build_artifact(PAYLOAD)
    document = json.loads(data)
    assert list(document) == ["certfsm_artifact", "payload", "sha256"] and document["certfsm_artifact"] == 2
    assert document["sha256"] == artifact.sha256 == sha256_hex(canonical_bytes(PAYLOAD))
    assert data == canonical_bytes(document) and b"\n" not in data and b": " not in data
    assert write_artifact(artifact_path, PAYLOAD) == artifact.sha256


def test_numpy_payload_values_are_written_as_plain_json(tmp_path):
    numeric = payload(
        table={
            "proposal": np.array([0, 1, 1, 2, 2, 0, 0, 0, 1], dtype=np.uint8),
            "status": "eeeeeecee",
            "allowed": np.array([7, 7, 3, 7, 7, 3, 7, 7, 3]),
        },
        grid={"edges": [np.linspace(0, 3, 4), np.array([0.0, 10, 20, 30])], "frac_bits": (4, None)},
    )
    assert build_artifact(numeric) == build_artifact(PAYLOAD)


def test_loaded_artifact_is_read_only_and_picklable(artifact_path):
    artifact = load_artifact(artifact_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        artifact.conservative = 1
    with pytest.raises(ValueError, match="read-only"):
        artifact.proposal[0, 0] = 2
    with pytest.raises(TypeError, match=r"^an artifact's spec is read-only"):
        artifact.spec["name"] = "other"
    assert not artifact.edges[0].flags.writeable and not artifact.allowed.flags.writeable
    clone = pickle.loads(pickle.dumps(artifact))
    assert clone.payload() == artifact.payload() and clone.sha256 == artifact.sha256


def test_uncertified_artifact_can_be_written_and_loaded_only_without_require_proved(tmp_path):
    document = payload()
    document["certificate"][1]["verdict"] = "violated"
    path = tmp_path / "CONTROLLER.cfsm"
    write_artifact(path, document)
    artifact = load_artifact(path, require_proved=False)
    assert not artifact.is_certified and [e.property for e in artifact.unproved] == ["machine-switch-cooldown"]
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(path))}: certificate\[1\] 'machine-switch-cooldown' has "
        r"verdict 'violated', but the runtime needs it proved; re-run certfsm "
        r"distill or fix the spec$",
    ):
        load_artifact(path)


# ---------------------------------------------------------------- tampering


def test_one_byte_of_the_table_changed_is_a_hash_mismatch(artifact_path):
    data = artifact_path.read_bytes()
    at = data.index(b'"proposal":[0,1,1,2') + len(b'"proposal":[0,1,1,')
    artifact_path.write_bytes(data[:at] + b"0" + data[at + 1 :])
    recorded = json.loads(data)["sha256"]
    with pytest.raises(
        ArtifactError,
        match=refusal(
            artifact_path,
            rf"sha256 mismatch: the payload hashes to [0-9a-f]{{16}}\.\.\. but the file records "
            rf"{recorded[:16]}\.\.\.; the artifact was modified after it was written",
        ),
    ):
        load_artifact(artifact_path)


def test_model_hash_changed_is_a_hash_mismatch(artifact_path):
    document = json.loads(artifact_path.read_bytes())
    document["payload"]["model_sha256"] = sha256_hex(b"another model")
    artifact_path.write_bytes(canonical_bytes(document))
    with pytest.raises(
        ArtifactError,
        match=refusal(
            artifact_path,
            r"sha256 mismatch: .* the artifact was modified "
            r"after it was written",
        ),
    ):
        load_artifact(artifact_path)


def test_verdict_flipped_with_the_hash_recomputed_is_a_certificate_refusal(tmp_path):
    document = payload()
    document["certificate"][1]["verdict"] = "unknown"
    path = forge(tmp_path / "CONTROLLER.cfsm", document)
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(path))}: certificate\[1\] 'machine-switch-cooldown' has "
        r"verdict 'unknown', but the runtime needs it proved; re-run certfsm "
        r"distill or fix the spec$",
    ):
        load_artifact(path)


def test_a_reformatted_file_is_refused_although_its_payload_is_intact(artifact_path):
    artifact_path.write_text(json.dumps(json.loads(artifact_path.read_bytes()), indent=1, sort_keys=True))
    with pytest.raises(
        ArtifactError,
        match=refusal(
            artifact_path,
            r"the bytes are not the canonical form of their content \(first difference at byte 1\), "
            r"although the payload hash matches; the file was reformatted or edited after it was "
            r"written",
        ),
    ):
        load_artifact(artifact_path)


def damage(mutate):
    def apply(path):
        data = path.read_bytes()
        path.write_bytes(mutate(data))

    return apply


@pytest.mark.parametrize(
    "mutate, text",
    [
        (damage(lambda d: d[: len(d) // 2]), r"not valid JSON at line 1 column \d+: .+ \(the file is damaged\)"),
        (damage(lambda d: d[:-1]), r"not valid JSON at line 1 column \d+: .+ \(the file is damaged\)"),
        (
            damage(lambda d: b"certfsm artifact, honest"),
            r"not valid JSON at line 1 column 1: Expecting value "
            r"\(the file is damaged\)",
        ),
        (damage(lambda d: b""), r"the file is empty \(the write was interrupted or the file was truncated\)"),
        (
            damage(lambda d: d.replace(b'"tiny"', b'"t\xc3\xafny"', 1)),
            r"byte \d+ is 0xc3, not ASCII, but an artifact is ASCII canonical JSON \(the file is damaged\)",
        ),
        (
            damage(lambda d: d.replace(b'"edges":[[0.0,1.0,', b'"edges":[[0.0,NaN,', 1)),
            r"not canonical JSON: it holds NaN, which JSON does not allow \(the file is damaged\)",
        ),
        (
            damage(lambda d: d.replace(b'"edges":[[0.0,1.0,', b'"edges":[[0.0,1e999,', 1)),
            r"not canonical JSON: the number 1e999 overflows a float64 \(the file is damaged\)",
        ),
        (
            damage(lambda d: d.replace(b'"engine":"z3",', b'"engine":"z3","engine":"z3",', 1)),
            r"not canonical JSON: the key 'engine' appears twice in one object \(the file is damaged\)",
        ),
        (
            damage(lambda d: d.replace(b'"sha256":"', b'"sha256":"X', 1)[:-3] + b'"}'),
            r"sha256=\"X[0-9a-f]+\.\.\. is not 64 lowercase hex digits \(the file is damaged\)",
        ),
    ],
)
def test_damaged_files_are_refused(artifact_path, mutate, text):
    mutate(artifact_path)
    with pytest.raises(ArtifactError, match=refusal(artifact_path, text)):
        load_artifact(artifact_path)


@pytest.mark.parametrize(
    "document, message",
    [
        (
            [1, 2],
            r"the top level is a list, so this is not a certfsm artifact; give a \.cfsm file written by certfsm "
            r"distill$",
        ),
        (
            {"certfsm_spec": 1},
            r"the top level has no 'certfsm_artifact' key, so this is not a certfsm artifact; give "
            r"a \.cfsm file written by certfsm distill$",
        ),
        (
            {"certfsm_artifact": 1, "sha256": "0" * 64, "payload": {}},
            r"certfsm_artifact=1 is not a format this certfsm reads \(it reads format 2\); re-run certfsm distill with "
            r"this certfsm$",
        ),
        (
            {"certfsm_artifact": True, "sha256": "0" * 64, "payload": {}},
            r"certfsm_artifact=true is not a format this certfsm reads",
        ),
        (
            {"certfsm_artifact": 2, "payload": {}},
            r"the top-level key 'sha256' is missing \(the file is damaged\); re-run certfsm distill$",
        ),
        (
            {"certfsm_artifact": 2, "sha256": "0" * 64, "payload": {}, "signed": "me"},
            r"unknown top-level key 'signed' \(format 2 has only certfsm_artifact, payload, sha256, signature\); the artifact was "
            r"modified after it was written; re-run certfsm distill$",
        ),
        (
            {"certfsm_artifact": 2, "sha256": "0" * 64, "payload": [1]},
            r"payload is a list, not an object \(the file is damaged\); re-run certfsm distill$",
        ),
    ],
)
def test_wrong_top_level_is_refused(tmp_path, document, message):
    path = tmp_path / "CONTROLLER.cfsm"
    path.write_bytes(canonical_bytes(document))
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: {message}"):
        load_artifact(path)


def test_missing_or_unreadable_file_is_refused(tmp_path):
    missing = tmp_path / "nothing.cfsm"
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(missing))}: no such file \(looked for .*nothing\.cfsm\)"
        r"; give the path of a \.cfsm artifact written by certfsm distill$",
    ):
        load_artifact(missing)
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(tmp_path))}: cannot read the artifact \(.+\); check "
        r"that the path names a readable file$",
    ):
        load_artifact(tmp_path)


def edited(change):
    """PAYLOAD with `change(document)` applied."""

    def make():
        document = copy.deepcopy(PAYLOAD)
        change(document)
        return document

    return make


def set_at(*parts_and_value):
    *parts, value = parts_and_value

    def change(document):
        target = document
        for part in parts[:-1]:
            target = target[part]
        if value is DELETE:
            del target[parts[-1]]
        else:
            target[parts[-1]] = value

    return edited(change)


DELETE = object()

# One bad payload per structural check, in the loader's order, with the pinned message (without label and fix).
BAD_PAYLOADS = [
    (set_at("table", DELETE), r"payload\.table is missing"),
    (set_at("table", "allowed", DELETE), r"payload\.table\.allowed is missing"),
    (
        set_at("signature", "x"),
        r"payload\.signature is not a field of artifact format 2 \(expected only certificate, "
        r"created_by, grid, machine, model_sha256, spec, table\)",
    ),
    (set_at("model_sha256", "ABC"), r"payload\.model_sha256=\"ABC\" is not a SHA-256 \(64 lowercase hex digits\)"),
    (set_at("created_by", "someone"), r"payload\.created_by=\"someone\" does not start with 'certfsm '"),
    (
        set_at("grid", "edges", 1, 2, 5.0),
        r"payload\.grid\.edges\[1\]\[2\]=5\.0 is not above payload\.grid\.edges"
        r"\[1\]\[1\]=10\.0; bin edges are strictly increasing",
    ),
    (set_at("grid", "edges", 0, 1, "1"), r"payload\.grid\.edges\[0\]\[1\]=\"1\" is not a finite number"),
    (
        set_at("grid", "edges", 0, 1, 10**400),
        r"payload\.grid\.edges\[0\]\[1\]=1000000.*\.\.\. is an integer beyond "
        r"float64's exact range \(2\^53\)",
    ),
    (
        set_at("grid", "frac_bits", [4]),
        r"payload\.grid\.frac_bits has 1 entries but payload\.grid\.edges has 2 "
        r"inputs",
    ),
    (set_at("grid", "frac_bits", 0, 25), r"payload\.grid\.frac_bits\[0\]=25 is not null or an integer from 0 to 24"),
    (set_at("machine", "codes", 2, 16), r"payload\.machine\.codes\[2\]=16 is not an integer from 0 to 15"),
    (
        set_at("machine", "codes", 2, 5),
        r"payload\.machine\.codes\[2\]=5 repeats payload\.machine\.codes\[1\]; each "
        r"output needs its own 4-bit code",
    ),
    (set_at("machine", "conservative", 3), r"payload\.machine\.conservative=3 is not an integer from 0 to 2"),
    (set_at("machine", "confirm_cycles", 0), r"payload\.machine\.confirm_cycles=0 is not an integer >= 1"),
    (set_at("machine", "cooldown_cycles", 1.0), r"payload\.machine\.cooldown_cycles=1\.0 is not an integer >= 0"),
    (
        set_at("machine", "overridable", [1, 0]),
        r"payload\.machine\.overridable\[1\]=0 is not above "
        r"payload\.machine\.overridable\[0\]=1; list output indices "
        r"ascending, each once",
    ),
    (
        set_at("spec", "outputs", ["KEEP", "FAST"]),
        r"payload\.spec\.outputs has 2 entries but payload\.machine\.codes "
        r"has 3",
    ),
    (
        set_at("spec", "tokens", "TURBO", 8),
        r"payload\.spec\.tokens\.TURBO=8 differs from payload\.machine\.codes\[2\]"
        r"=9; the machine must emit the spec's codes",
    ),
    (
        set_at("spec", "conservative_token", "FAST"),
        r"payload\.spec\.conservative_token=\"FAST\" differs from "
        r"payload\.machine\.conservative=0 \(KEEP\)",
    ),
    (
        set_at("spec", "inputs", 1, "edges", [0.0, 10.0, 25.0, 30.0]),
        r"payload\.spec\.inputs\[1\]\.edges differs from payload\.grid\.edges\[1\]; the grid must be the spec's bin "
        r"edges",
    ),
    (
        set_at("spec", "inputs", 0, "frac_bits", DELETE),
        r"payload\.spec\.inputs\[0\]\.frac_bits=null differs from "
        r"payload\.grid\.frac_bits\[0\]=4",
    ),
    (
        set_at("spec", "hysteresis", "cooldown_cycles", 4),
        r"payload\.spec\.hysteresis\.cooldown_cycles=4 differs from "
        r"payload\.machine\.cooldown_cycles=8",
    ),
    (
        set_at("spec", "overrides", "overridable", ["KEEP"]),
        r"payload\.spec\.overrides\.overridable=\[\"KEEP\"\] differs from payload\.machine\.overridable=\[0, 1\] "
        r"\(KEEP, FAST\)",
    ),
    (
        set_at("spec", "legal_tokens", ["KEEP", "TURBO"]),
        r"payload\.machine\.overridable lists FAST \(output 1\), which is not in payload\.spec\.legal_tokens; an "
        r"override may force only legal tokens",
    ),
    (set_at("table", "proposal", [0] * 8), r"payload\.table\.proposal has 8 entries but the grid has 9 cells"),
    (set_at("table", "status", "eeee"), r"payload\.table\.status has 4 characters but the grid has 9 cells"),
    (set_at("table", "allowed", [7] * 10), r"payload\.table\.allowed has 10 entries but the grid has 9 cells"),
    (set_at("table", "proposal", 4, 3), r"payload\.table\.proposal\[4\]=3 is not an output index 0\.\.2"),
    (set_at("table", "proposal", 4, True), r"payload\.table\.proposal\[4\]=true is not an output index 0\.\.2"),
    (
        set_at("table", "status", "eeeeeexee"),
        r"payload\.table\.status\[6\]='x' is neither 'e' \(exact\) nor 'c' "
        r"\(conservative\)",
    ),
    (
        set_at("table", "allowed", 0, 8),
        r"payload\.table\.allowed\[0\]=8 is not a bitmask over 3 outputs \(an integer "
        r"from 0 to 7\)",
    ),
    (
        set_at("table", "allowed", 7, 6),
        r"payload\.table\.allowed\[7\]=6 does not allow the conservative token KEEP "
        r"in cell 7 \(bins 2, 1\); the fallback must be allowed in every cell",
    ),
    (
        set_at("table", "proposal", 5, 2),
        r"payload\.table\.proposal\[5\]=2 \(TURBO\) is not allowed in cell 5 \(bins "
        r"1, 2\) \(allowed there: KEEP, FAST\); the table may propose only an allowed "
        r"token",
    ),
    (
        set_at("table", "status", "eeeecccee"),
        r"payload\.table\.proposal\[4\]=2 \(TURBO\) in cell 4 \(bins 1, 1\), "
        r"whose status is 'c' \(conservative\); a conservative cell holds the "
        r"conservative token 0 \(KEEP\)",
    ),
    (set_at("certificate", []), r"payload\.certificate has 0 entries, expected at least 1"),
    (
        set_at("certificate", 0, "verdict", "probably"),
        r"payload\.certificate\[0\]\.verdict=\"probably\" is not one of "
        r"proved, violated, unknown",
    ),
    (
        set_at("certificate", 1, "property", "table-tokens"),
        r"payload\.certificate\[1\]\.property=\"table-tokens\" repeats payload\.certificate\[0\]; list each property "
        r"once",
    ),
    (
        set_at("certificate", 0, "seconds", 0.5),
        r"payload\.certificate\[0\]\.seconds is not a field of artifact format 2 \(expected only engine, property, "
        r"required, smt2, smt2_sha256, verdict, and optionally proof_certificate and proof_certificate_sha256\)",
    ),
    (
        set_at("certificate", 0, "smt2", "../etc/x.smt2"),
        r"payload\.certificate\[0\]\.smt2=\"\.\./etc/x\.smt2\" is neither null nor a plain \.smt2 file name "
        r"\(letters, digits, '_', '\.', '-'; no folders\)",
    ),
    (
        set_at("certificate", 2, "smt2_sha256", "0" * 64),
        r"payload\.certificate\[2\]\.smt2_sha256 is set but payload\.certificate\[2\]\.smt2 is null; give both or "
        r"neither",
    ),
    (
        set_at("certificate", 0, "smt2_sha256", None),
        r"payload\.certificate\[0\]\.smt2_sha256=null is not a SHA-256 \(64 lowercase hex digits\)",
    ),
    (set_at("certificate", 0, "required", 1), r"payload\.certificate\[0\]\.required=1 is not true or false"),
    (
        edited(lambda d: [entry.update(required=False) for entry in d["certificate"]]),
        r"payload\.certificate has no entry with required=true, so no proof backs the artifact",
    ),
]

BAD_IDS = [message.split(" ")[0].replace("\\", "") for _, message in BAD_PAYLOADS]


@pytest.mark.parametrize("make, message", BAD_PAYLOADS, ids=BAD_IDS)
def test_inconsistent_payload_is_refused_on_load_even_with_a_correct_hash(tmp_path, make, message):
    path = forge(tmp_path / "CONTROLLER.cfsm", make())
    with pytest.raises(ArtifactError, match=refusal(path, message)):
        load_artifact(path)


@pytest.mark.parametrize("make, message", BAD_PAYLOADS, ids=BAD_IDS)
def test_inconsistent_payload_is_refused_by_the_writer_and_nothing_is_written(tmp_path, make, message):
    path = tmp_path / "CONTROLLER.cfsm"
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(path))} \(not written\): {message}; fix the code that "
        r"built the payload: the loader would refuse this artifact$",
    ):
        write_artifact(path, make())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ArtifactError, match=rf"^artifact payload: {message}; "):
        build_artifact(make())


def test_writer_names_an_unwritable_value_by_its_payload_path():
    with pytest.raises(
        ArtifactError,
        match=r"^artifact payload: cannot write canonical JSON: "
        r"payload\.grid\.edges\[0\]\[1\]=inf is not a finite number",
    ):
        build_artifact(edited(lambda d: d["grid"]["edges"][0].__setitem__(1, float("inf")))())


def test_a_spelling_that_keeps_the_payload_is_refused_by_the_canonical_form_check(artifact_path):
    """1.0 and 1.00 are the same float, so the hash still matches; only the canonical bytes differ."""
    data = artifact_path.read_bytes()
    at = data.index(b'"edges":[[0.0,1.0') + len(b'"edges":[[0.0,1.0')
    artifact_path.write_bytes(data[:at] + b"0" + data[at:])
    with pytest.raises(
        ArtifactError,
        match=refusal(
            artifact_path,
            rf"the bytes are not the canonical form of their "
            rf"content \(first difference at byte {at}\), "
            r"although the payload hash matches; the file was "
            r"reformatted or edited after it was written",
        ),
    ):
        load_artifact(artifact_path)


# ---------------------------------------------------------------- fuzzing


@pytest.mark.slow
def test_every_case_flip_at_every_byte_is_refused(artifact_path):
    """Case flips are where a changed byte can keep the value (1e-05 / 1E-05); try each position exhaustively."""
    original, damaged = artifact_path.read_bytes(), artifact_path.with_name("damaged.cfsm")
    for at in range(len(original)):
        damaged.write_bytes(original[:at] + bytes([original[at] ^ 0x20]) + original[at + 1 :])
        with pytest.raises(ArtifactError):
            load_artifact(damaged)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_single_byte_change_is_refused(artifact_path, data):
    """Canonical form leaves no insignificant byte: any change fails JSON, the hash, canonical form or structure."""
    original = artifact_path.read_bytes()
    at = data.draw(st.integers(0, len(original) - 1), label="byte")
    flip = data.draw(st.integers(1, 255), label="xor")
    damaged = artifact_path.with_name("damaged.cfsm")
    damaged.write_bytes(original[:at] + bytes([original[at] ^ flip]) + original[at + 1 :])
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(damaged))}: "):
        load_artifact(damaged)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 20)
    | st.floats(-5, 40)
    | st.text(max_size=3)
    | st.sampled_from(["KEEP", "e", "c", "proved", "0" * 64]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=6,
)


def _nodes(value, parts=()):
    yield parts
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _nodes(child, parts + (key,))


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_any_value_replaced_anywhere_loads_or_is_refused_with_an_artifact_error(tmp_path_factory, data):
    """The structural checks never crash: with the hash recomputed, every edit loads cleanly or is an ArtifactError."""
    document = copy.deepcopy(PAYLOAD)
    parts = data.draw(st.sampled_from(list(_nodes(document))[1:]), label="where")
    target = document
    for part in parts[:-1]:
        target = target[part]
    if data.draw(st.booleans(), label="delete") and isinstance(target, dict):
        del target[parts[-1]]
    else:
        target[parts[-1]] = data.draw(JSON_VALUES, label="value")
    path = forge(tmp_path_factory.getbasetemp() / "fuzzed.cfsm", document)
    try:
        artifact = load_artifact(path, require_proved=False)
    except ArtifactError as error:
        assert str(error).startswith(f"{path}: ") and str(error).endswith("re-run certfsm distill")
    else:
        assert build_artifact(artifact.payload()) == path.read_bytes()
        artifact_validator().validate(json.loads(path.read_bytes()))


def test_an_integer_written_where_certfsm_writes_a_float_is_refused(tmp_path):
    """0 and 0.0 decode to the same edge: two files, two hashes, one artifact, unless the loader refuses the one
    certfsm never writes (found by the property above)."""
    document = copy.deepcopy(PAYLOAD)
    document["grid"]["edges"][0][0] = 0
    path = forge(tmp_path / "integer-edge.cfsm", document)
    with pytest.raises(
        ArtifactError,
        match=r"payload\.grid\.edges\[0\]\[0\]=0 is not what certfsm writes for the value "
        r"it decodes to \(0\.0;",
    ):
        load_artifact(path, require_proved=False)


# ---------------------------------------------------------------- the published schema


@functools.cache
def artifact_validator():
    text = importlib.resources.files("certfsm").joinpath("artifact.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_accepts_a_written_artifact_and_rejects_shape_errors(artifact_path):
    document = json.loads(artifact_path.read_bytes())
    artifact_validator().validate(document)
    for make, _ in BAD_PAYLOADS[:5] + BAD_PAYLOADS[9:11]:
        assert not artifact_validator().is_valid(dict(document, payload=make()))


# ---------------------------------------------------------------- lightweight loading, atomic writing


def test_loading_and_inspecting_import_neither_onnx_maraboupy_z3_nor_jsonschema(artifact_path):
    code = (
        "import sys\n"
        "from certfsm._artifact import load_artifact\n"
        "from certfsm._inspect import inspect_artifact\n"
        f"artifact = load_artifact({str(artifact_path)!r})\n"
        "assert artifact.n_cells == 9\n"
        f"assert inspect_artifact({str(artifact_path)!r}).is_ok\n"
        "heavy = sorted(m for m in ('onnx', 'onnxruntime', 'maraboupy', 'z3', 'jsonschema') if m in sys.modules)\n"
        "print(','.join(heavy) or 'none')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "none"


def test_failing_write_leaves_the_old_artifact_intact(artifact_path, monkeypatch):
    before = artifact_path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    changed = payload(created_by="certfsm 0.2.0")
    with pytest.raises(
        ReportError,
        match=rf"^{re.escape(str(artifact_path))}: cannot write the artifact \(No space "
        r"left on device\); choose a writable path for the "
        r"artifact$",
    ):
        write_artifact(artifact_path, changed)
    assert artifact_path.read_bytes() == before
    assert [p.name for p in artifact_path.parent.iterdir()] == [artifact_path.name]
    monkeypatch.undo()
    write_artifact(artifact_path, changed)
    assert load_artifact(artifact_path).created_by == "certfsm 0.2.0"


def test_interrupted_write_leaves_the_old_artifact_intact(artifact_path, monkeypatch):
    before = artifact_path.read_bytes()

    def interrupted(source, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_artifact(artifact_path, payload(created_by="certfsm 0.2.0"))
    assert artifact_path.read_bytes() == before
    assert [p.name for p in artifact_path.parent.iterdir()] == [artifact_path.name]


def test_written_file_is_world_readable(artifact_path):
    assert artifact_path.stat().st_mode & 0o777 == 0o644


def test_artifact_error_is_a_certfsm_error_and_a_value_error():
    assert issubclass(ArtifactError, CertfsmError) and issubclass(ArtifactError, ValueError)
