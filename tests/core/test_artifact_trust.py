"""Issue 9 part 1: an attacker's rehashed edits of a real distilled artifact, and what the loader re-derives.

Each edit is applied to the payload of the distilled example, the SHA-256
is recomputed and the canonical bytes written, as an attacker would. The
loader must refuse it with one line naming the item, and `certfsm inspect`
must name the same item in its check list. The edits that part 1 cannot
catch by design (they need the model or a signature) are asserted to
LOAD, with the part of issue 9 that catches them, so that this file fails
the day they start being caught (or stop being caught for the wrong reason).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from certfsm._artifact import load_artifact
from certfsm._artifact_checks import ARTIFACT_FORMAT_VERSION
from certfsm._artifact_trust import required_properties
from certfsm._canonical import canonical_bytes, sha256_hex
from certfsm._errors import ArtifactError
from certfsm._inspect import inspect_artifact
from certfsm import spec_from_dict
from certfsm.machine import cell_allowed_masks

KEEP, FUSE, INT4, OFFLOAD, SPARSE = range(5)
HOT = 3  # the input index of temperature; its last bin is [85, 110]


@pytest.fixture(scope="module")
def original(distilled_example):
    _, _, path = distilled_example
    return json.loads(path.read_bytes())["payload"]


def rehash(folder, payload, name="edited.cfsm"):
    """Write `payload` as the attacker does: the hash recomputed, the bytes canonical."""
    path = folder / name
    path.write_bytes(
        canonical_bytes(
            {
                "certfsm_artifact": ARTIFACT_FORMAT_VERSION,
                "sha256": sha256_hex(canonical_bytes(payload)),
                "payload": payload,
            }
        )
    )
    return path


def shape_of(payload):
    return tuple(len(e) - 1 for e in payload["grid"]["edges"])


def cells_where(payload, predicate):
    """Flat cells whose bins, proposal, status and allowed mask satisfy `predicate(bins, proposal, status, mask)`."""
    shape, table = shape_of(payload), payload["table"]
    return [
        k
        for k in range(len(table["proposal"]))
        if predicate(np.unravel_index(k, shape), table["proposal"][k], table["status"][k], table["allowed"][k])
    ]


def masks_of(spec_document):
    """The allowed masks of a spec document by the core's rule (`cell_allowed_masks`), as the attacker recomputes
    them (tests/fsm/test_table_masks.py holds the distillation's vectorised masks equal to it)."""
    spec = spec_from_dict(spec_document, "/certfsm-test/spec.json", require_model=False)
    legal = sum(1 << spec.output_index(t) for t in spec.legal_tokens)
    rules = [(r.lower, r.upper, sum(1 << k for k in spec.forbidden_indices(r))) for r in spec.rules]
    return list(cell_allowed_masks([item.edges for item in spec.inputs], legal, rules))


# ---------------------------------------------------------------- the edits


def int4_when_hot(p):
    """The issue's attack: a hot cell proposes INT4 and its mask allows it."""
    k = cells_where(p, lambda b, t, s, m: b[HOT] == shape_of(p)[HOT] - 1 and s == "e")[0]
    p["table"]["proposal"][k] = INT4
    p["table"]["allowed"][k] |= 1 << INT4


def exact_token_not_allowed(p):
    k = cells_where(p, lambda b, t, s, m: s == "e" and b[HOT] == shape_of(p)[HOT] - 1)[0]
    p["table"]["proposal"][k] = INT4


def exact_token_swapped_for_another_allowed(p):
    k = cells_where(p, lambda b, t, s, m: s == "e" and t != FUSE and m >> FUSE & 1)[0]
    p["table"]["proposal"][k] = FUSE


def conservative_cell_turned_exact(p):
    k = cells_where(p, lambda b, t, s, m: s == "c")[0]
    p["table"]["status"] = p["table"]["status"][:k] + "e" + p["table"]["status"][k + 1 :]


def conservative_cell_turned_exact_with_a_token(p):
    k = cells_where(p, lambda b, t, s, m: s == "c" and m >> FUSE & 1)[0]
    p["table"]["status"] = p["table"]["status"][:k] + "e" + p["table"]["status"][k + 1 :]
    p["table"]["proposal"][k] = FUSE


def conservative_cell_given_a_token(p):
    k = cells_where(p, lambda b, t, s, m: s == "c" and m >> FUSE & 1)[0]
    p["table"]["proposal"][k] = FUSE


def cooldown_in_machine_only(p):
    p["machine"]["cooldown_cycles"] = 0


def confirm_cooldown_in_both(p):
    p["machine"].update(confirm_cycles=1, cooldown_cycles=0)
    p["spec"]["hysteresis"] = {"confirm_cycles": 1, "cooldown_cycles": 0}


def every_token_overridable_in_both(p):
    p["machine"]["overridable"] = [KEEP, FUSE, INT4, OFFLOAD, SPARSE]
    p["spec"]["overrides"]["overridable"] = list(p["spec"]["outputs"])


def every_legal_token_overridable_in_both(p):
    p["machine"]["overridable"] = [KEEP, FUSE, INT4, OFFLOAD]
    p["spec"]["overrides"]["overridable"] = ["KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU"]


def rule_box_moved(p):
    p["spec"]["legality_rules"][0]["when"]["temperature"]["min"] = 75.5


def rule_box_deleted(p):
    del p["spec"]["legality_rules"][0]


def rule_box_moved_with_masks_recomputed(p):
    rule_box_moved(p)
    p["table"]["allowed"] = masks_of(p["spec"])


def rule_box_deleted_with_masks_recomputed(p):
    rule_box_deleted(p)
    p["table"]["allowed"] = masks_of(p["spec"])


def rule_forbids_the_conservative_token(p):
    p["spec"]["legality_rules"][0]["forbid"] = ["KEEP", "INT4"]


def rule_names_no_input(p):
    p["spec"]["legality_rules"][0]["when"] = {"temp": {"min": 85.0}}


def gate_margin_zero(p):
    p["spec"]["confidence_gate"] = {"margin": 0.0}


def gate_probability_below_one_in_k(p):
    p["spec"]["confidence_gate"] = {"probability": 0.1}


def gate_margin_and_probability(p):
    p["spec"]["confidence_gate"] = {"margin": 0.0, "probability": 0.9}


def grid_start_moved_in_both(p):
    p["grid"]["edges"][HOT][0] = 10.0
    p["spec"]["inputs"][HOT]["edges"][0] = 10.0


def model_hash_swapped(p):
    p["model_sha256"] = sha256_hex(b"another model")


def certificate_entry_removed(p):
    p["certificate"] = [e for e in p["certificate"] if e["property"] != "machine-switch-cooldown"]


def certificate_entries_all_but_one_removed(p):
    p["certificate"] = p["certificate"][:1]


def certificate_entry_not_required(p):
    next(e for e in p["certificate"] if e["property"] == "table-masks").update(required=False, verdict="unknown")


def certificate_entry_extra(p):
    p["certificate"].append(dict(p["certificate"][1], property="table-anything", required=False))


def certificate_cells_by_sampling(p):
    p["certificate"][0]["engine"] = "sampling"


def certificate_machine_by_marabou(p):
    next(e for e in p["certificate"] if e["property"] == "machine-output-allowed")["engine"] = "marabou"


def certificate_enumeration_by_z3(p):
    next(e for e in p["certificate"] if e["property"] == "enumeration-switch-cooldown")["engine"] = "z3"


def certificate_verdict_unknown(p):
    next(e for e in p["certificate"] if e["property"] == "cells-exact")["verdict"] = "unknown"


CELL = r"cell \d+ \(bins \d+, \d+, \d+, \d+, \d+\)"
HOT_CELL = r"cell \d+ \(bins \d+, \d+, \d+, 4, \d+\)"

# (edit, the check of `certfsm inspect` that fails, the loader's line without file label and fix)
REFUSED = [
    (
        int4_when_hot,
        "structure",
        rf"payload\.table\.allowed\[\d+\]=\d+ in {HOT_CELL} differs from the mask \d+ that the spec's legality rules "
        r"give: it allows INT4, which rule 'no-int4-when-hot' of payload\.spec\.legality_rules forbids there",
    ),
    (
        exact_token_not_allowed,
        "structure",
        rf"payload\.table\.proposal\[\d+\]=2 \(INT4\) is not allowed in {HOT_CELL} \(allowed there: KEEP, FUSE_CONV"
        r"(, OFFLOAD_CPU)?\); the table may propose only an allowed token",
    ),
    (
        conservative_cell_given_a_token,
        "structure",
        rf"payload\.table\.proposal\[\d+\]=1 \(FUSE_CONV\) in {CELL}, whose status is 'c' \(conservative\); a "
        r"conservative cell holds the conservative token 0 \(KEEP\)",
    ),
    (
        cooldown_in_machine_only,
        "structure",
        r"payload\.spec\.hysteresis\.cooldown_cycles=8 differs from payload\.machine\.cooldown_cycles=0",
    ),
    (
        every_token_overridable_in_both,
        "structure",
        r"payload\.machine\.overridable lists SPARSE_2_4 \(output 4\), which is not in payload\.spec\.legal_tokens; "
        r"an override may force only legal tokens",
    ),
    (
        rule_box_moved,
        "structure",
        rf"payload\.table\.allowed\[\d+\]=\d+ in {CELL} differs from the mask \d+ that the spec's legality rules give: "
        r"it allows INT4, which rule 'no-int4-when-hot' of payload\.spec\.legality_rules forbids there",
    ),
    (
        rule_box_deleted,
        "structure",
        rf"payload\.table\.allowed\[\d+\]=\d+ in {HOT_CELL} differs from the mask \d+ that the spec's legality rules "
        r"give: it forbids INT4, which no rule of payload\.spec\.legality_rules forbids there",
    ),
    (
        rule_forbids_the_conservative_token,
        "structure",
        r"payload\.spec\.legality_rules\[0\]\.forbid\[0\]=\"KEEP\" is the conservative token, which must be allowed "
        r"in every cell",
    ),
    (
        rule_names_no_input,
        "structure",
        r"payload\.spec\.legality_rules\[0\]\.when\.temp names no input of payload\.spec\.inputs \(compute_util, "
        r"mem_bw_util, l2_miss_rate, temperature, queue_depth\)",
    ),
    (
        gate_probability_below_one_in_k,
        "structure",
        r"payload\.spec\.confidence_gate\.probability=0\.1 gives the logit margin -0\.81093 with K=5 outputs; a gate "
        r"needs a margin >= 0",
    ),
    (
        gate_margin_and_probability,
        "structure",
        r"payload\.spec\.confidence_gate=\{\"margin\": 0\.0, \"probability\": 0\.9\} does not give exactly one of "
        r"margin and probability",
    ),
    (
        grid_start_moved_in_both,
        "structure",
        r"payload\.spec\.inputs\[3\]\.edges\[0\]=10\.0 differs from payload\.spec\.inputs\[3\]\.min=20(\.0)?; the "
        r"first edge must equal min",
    ),
    (
        certificate_entry_removed,
        "certificate",
        r"the certificate has no entry for 'machine-switch-cooldown', but the runtime needs every property certfsm "
        r"distill proves",
    ),
    (
        certificate_entries_all_but_one_removed,
        "certificate",
        r"the certificate has no entry for 'table-tokens' \(nor 16 more\), but the runtime needs every property "
        r"certfsm distill proves",
    ),
    (
        certificate_entry_not_required,
        "certificate",
        r"certificate\[2\] 'table-masks' has required=false, but the runtime needs every property certfsm distill "
        r"proves",
    ),
    (
        certificate_entry_extra,
        "certificate",
        r"certificate\[18\] 'table-anything' is not one of the 18 properties certfsm distill proves \(cells-exact, "
        r"table-\{tokens,masks,codes\}, machine-\{invariant-initial,invariant-inductive,<property>\}, "
        r"enumeration-<property>\)",
    ),
    (
        certificate_cells_by_sampling,
        "certificate",
        r"certificate\[0\] 'cells-exact' names engine 'sampling', which cannot prove it \(expected: 'none' when no "
        r"cell is exact, else the engines of the exact cells joined by '\+', sorted, each one of bounds, check, "
        r"marabou, z3\)",
    ),
    (
        certificate_machine_by_marabou,
        "certificate",
        r"certificate\[7\] 'machine-output-allowed' names engine 'marabou', which cannot prove it \(expected: z3 "
        r"only: the machine's SMT-LIB query is unsat over exact arithmetic\)",
    ),
    (
        certificate_enumeration_by_z3,
        "certificate",
        r"certificate\[15\] 'enumeration-switch-cooldown' names engine 'z3', which cannot prove it \(expected: "
        r"explicit only: the complete explicit-state enumeration\)",
    ),
]

# The rehashed edits part 1 cannot catch, each with the part of issue 9 that does. They must still load.
LOADS = [
    # part 3 (inspect --deep re-proves every exact cell against the model): the loader has no model.
    exact_token_swapped_for_another_allowed,
    conservative_cell_turned_exact,
    conservative_cell_turned_exact_with_a_token,
    # part 3 (the model's SHA-256 is compared with the model file).
    model_hash_swapped,
    # part 2 (a signature over the payload): the spec itself was edited, consistently, so the artifact is a
    # self-consistent artifact of another spec; nothing in it says which spec was distilled. Signed and loaded
    # with the trusted key, every edit of this list is refused (test_a_rehashed_edit_of_a_signed_artifact_...).
    confirm_cooldown_in_both,
    every_legal_token_overridable_in_both,
    rule_box_moved_with_masks_recomputed,
    rule_box_deleted_with_masks_recomputed,
    # part 2, and part 3 where the table no longer fits the new margin: the gate is read only by the distillation.
    gate_margin_zero,
]


def fix_of(failing):
    return r"re-run certfsm distill( or fix the spec)?" if failing == "certificate" else r"re-run certfsm distill"


@pytest.mark.parametrize("edit, failing, message", REFUSED, ids=[edit.__name__ for edit, _, _ in REFUSED])
def test_a_rehashed_edit_is_refused_naming_the_item_and_inspect_names_it_too(
    original, tmp_path, edit, failing, message
):
    payload = copy.deepcopy(original)
    edit(payload)
    path = rehash(tmp_path, payload)
    pattern = rf"^{re.escape(str(path))}: {message}; {fix_of(failing)}$"
    with pytest.raises(ArtifactError, match=pattern) as refused:
        load_artifact(path)
    inspection = inspect_artifact(path)
    assert not inspection.is_ok
    first = next(check for check in inspection.checks if not check.passed)
    assert (first.name, first.passed, first.detail) == (failing, False, str(refused.value))
    assert inspection.lines[-1] == f"verdict: FAILED: the {failing} check did not pass"


@pytest.mark.parametrize("edit", LOADS, ids=[edit.__name__ for edit in LOADS])
def test_a_rehashed_edit_that_part_1_cannot_catch_still_loads(original, tmp_path, edit):
    payload = copy.deepcopy(original)
    edit(payload)
    assert payload != original
    path = rehash(tmp_path, payload)
    artifact = load_artifact(path)
    assert artifact.payload() == payload and artifact.is_certified
    assert inspect_artifact(path).is_ok


@pytest.fixture(scope="module")
def signed_original(distilled_example, tmp_path_factory):
    """The distilled example signed with a fresh key: (its document, the trusted public key file)."""
    pytest.importorskip("cryptography", reason='the sign extra is not installed: pip install "certfsm[sign]"')
    from certfsm._artifact import sign_artifact
    from certfsm._signing import generate_key_pair

    folder = tmp_path_factory.mktemp("signed-original")
    key = generate_key_pair(folder / "key")
    path = folder / "example.cfsm"
    path.write_bytes(distilled_example[2].read_bytes())
    sign_artifact(path, folder / "key")
    return json.loads(path.read_bytes()), key.source


@pytest.mark.parametrize("edit", LOADS, ids=[edit.__name__ for edit in LOADS])
def test_a_rehashed_edit_of_a_signed_artifact_is_refused_with_the_trusted_key(signed_original, tmp_path, edit):
    """Part 2 closes what part 1 cannot: the spec edited consistently (and the rest of LOADS) no longer verifies."""
    document, trusted = signed_original
    payload = copy.deepcopy(document["payload"])
    edit(payload)
    path = tmp_path / "edited.cfsm"
    path.write_bytes(canonical_bytes({**document, "sha256": sha256_hex(canonical_bytes(payload)), "payload": payload}))
    assert load_artifact(path).is_certified  # without trusted keys the rehashed edit still loads
    key_id = document["signature"]["key_id"]
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(path))}: the signature by key id {key_id} does not "
        r"verify over the payload: ",
    ):
        load_artifact(path, trusted_keys=[trusted])


def test_the_distilled_artifact_itself_loads_and_inspects_clean(distilled_example):
    _, run, path = distilled_example
    assert run.certified and load_artifact(path).is_certified and inspect_artifact(path).is_ok


# ---------------------------------------------------------------- what the loader derives, against fsm


def test_the_required_properties_are_what_the_pipeline_writes(distilled_example):
    from certfsm import INVARIANT_QUERIES, MACHINE_PROPERTIES, TABLE_PROPERTIES

    spec, run, _ = distilled_example
    expected = (
        ("cells-exact",)
        + TABLE_PROPERTIES
        + tuple(f"machine-{n}" for n in INVARIANT_QUERIES + MACHINE_PROPERTIES)
        + tuple(f"enumeration-{n}" for n in MACHINE_PROPERTIES)
    )
    assert required_properties(spec.to_json()) == expected
    assert tuple(entry.property for entry in run.certificate) == expected
    assert all(entry.required for entry in run.certificate)


def test_a_rule_touching_a_cell_only_at_its_open_end_does_not_forbid_there():
    # Bins [0, 1) [1, 2]: a rule from 1 meets only the closed last bin; a rule up to 1 meets both.
    assert cell_allowed_masks([(0.0, 1.0, 2.0)], 0b11, [((1.0,), (2.0,), 0b10)]) == (0b11, 0b01)
    assert cell_allowed_masks([(0.0, 1.0, 2.0)], 0b11, [((0.0,), (1.0,), 0b10)]) == (0b01, 0b01)
    assert cell_allowed_masks([(0.0, 1.0, 2.0)], 0b11, [((2.0,), (2.0,), 0b10)]) == (0b11, 0b01)


def test_loading_imports_neither_fsm_nor_verify_nor_a_solver(distilled_example):
    _, _, path = distilled_example
    code = (
        "import sys\n"
        "from certfsm._artifact import load_artifact\n"
        "from certfsm._inspect import inspect_artifact\n"
        f"assert load_artifact({str(path)!r}).is_certified and inspect_artifact({str(path)!r}).is_ok\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime', 'maraboupy', 'z3', "
        "'jsonschema') or m.startswith(('certfsm.fsm', 'certfsm.verify')))\n"
        "print(','.join(heavy) or 'none')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "none"


def test_certified_is_one_rule_for_the_pipeline_the_loader_and_the_artifact(distilled_example):
    """Every required entry proved is not enough: the entries must also be exactly the required set, each by an
    engine that can prove it; `certfsm distill` reports what the loader will decide."""
    from dataclasses import replace

    from certfsm import is_certified

    spec, run, path = distilled_example
    artifact = load_artifact(path)
    assert run.certified and artifact.is_certified and is_certified(run.certificate, spec.to_json(), True)
    by_sampling = (replace(run.certificate[0], engine="sampling"),) + run.certificate[1:]
    assert all(record.is_proved and record.required for record in by_sampling)
    assert not is_certified(by_sampling, spec.to_json(), True)
    assert not is_certified(run.certificate[1:], spec.to_json(), True)
