"""A refined table in the artifact (``payload.table.refinement``): it loads, round-trips, leaves flat artifacts' bytes
alone, each kind of bad refinement is refused with its message pinned, and what reads cells only refuses it."""

from __future__ import annotations

import copy
import json
import re
from fractions import Fraction

import pytest

from certfsm import load_artifact, spec_from_dict, write_artifact
from certfsm._artifact import build_artifact
from certfsm._box_tree import MAX_TREE_DEPTH, MAX_TREE_LEAVES, LeafStatus
from certfsm._errors import ArtifactError, SpecError
from certfsm.hdl_export import hardware_of
from certfsm.machine import Machine
from certfsm.runtime import Controller
from test_artifact import PAYLOAD, artifact_validator, forge, refusal

# Cell 3 (a in [1, 2), b in [0, 10)): b < 2.5 -> leaf 0 (exact TURBO), b >= 2.5 -> leaf 1 (exact FAST). Cell 6 is
# a in [2, 3] (frac_bits 4: thresholds are integers v meaning v/16), b in [0, 10) (float64 thresholds): a < 2.5 ->
# leaf 2 (exact FAST); a >= 2.5: b < 5 -> leaf 3 (conservative KEEP), b >= 5 -> leaf 4 (undecided KEEP).
REFINEMENT = {
    "version": 1,
    "cells": [3, 6],
    "trees": [
        [["split", 1, 2.5], ["leaf", 0], ["leaf", 1]],
        [["split", 0, 40], ["leaf", 2], ["split", 1, 5.0], ["leaf", 3], ["leaf", 4]],
    ],
    "proposal": [2, 1, 1, 0, 0],
    "status": "eeecu",
    "allowed": [7, 7, 7, 7, 7],
}


def refined(**changes):
    document = copy.deepcopy(PAYLOAD)
    document["spec"]["refine"] = {"max_depth": 2, "max_leaves": 3}
    document["table"]["status"] = "eeeceecee"  # cell 3 refined: its own entry conservative
    document["table"]["proposal"][3] = 0
    document["table"]["refinement"] = copy.deepcopy(REFINEMENT)
    for key, value in changes.items():
        document["table"]["refinement"][key] = value
    return document


@pytest.fixture
def refined_path(tmp_path):
    path = tmp_path / "REFINED.cfsm"
    write_artifact(path, refined())
    return path


def test_a_refined_artifact_loads_and_its_machine_reads_leaves(refined_path):
    artifact = load_artifact(refined_path)
    assert artifact.refinement.cells == (3, 6) and artifact.refinement.n_leaves == 5
    tree = artifact.refinement.tree_of(6)
    assert [leaf.status for leaf in tree.leaves] == [LeafStatus.EXACT, LeafStatus.CONSERVATIVE, LeafStatus.UNDECIDED]
    assert tree.boxes[2].intervals[0].low == Fraction(5, 2) and tree.boxes[2].intervals[1].low == 5
    machine = Machine.from_artifact(artifact)
    assert machine.leaf_of([2.25, 1.0]) == tree.leaves[0] and machine.leaf_of([2.25, 1.0]).token == 1
    assert machine.leaf_of([2.5, 4.0]) == tree.leaves[1]
    assert machine.leaf_of([Fraction(5, 2), 5]) == tree.leaves[2]
    assert machine.leaf_of([1.5, 2.5]).token == 1 and machine.leaf_of([1.5, 2.4]).token == 2
    assert machine.leaf_of([0.5, 25.0]) == machine.cell_leaf(2) and machine.cell_leaf(2).allowed == 3
    assert machine.leaf_of([3.5, 1.0]) is None
    assert machine.leaf_row(machine.leaf_of([2.25, 1.0])) == (True, True, True)


def test_a_refined_artifact_round_trips_to_its_bytes_and_the_schema_accepts_it(refined_path):
    data = refined_path.read_bytes()
    assert build_artifact(load_artifact(refined_path).payload()) == data
    artifact_validator().validate(json.loads(data))


def test_a_flat_artifact_has_no_refinement_field_and_its_spec_no_refine(tmp_path):
    path = tmp_path / "FLAT.cfsm"
    write_artifact(path, PAYLOAD)
    payload = json.loads(path.read_bytes())["payload"]
    assert "refinement" not in payload["table"] and "refine" not in payload["spec"]
    artifact = load_artifact(path)
    assert artifact.refinement is None and Machine.from_artifact(artifact).refinement is None


def test_the_certificate_counts_exact_leaves_as_exact(tmp_path):
    """With every flat cell conservative but an exact leaf, cells-exact must still name a proving engine."""
    document = refined()
    document["table"]["status"] = "c" * 9
    document["table"]["proposal"] = [0] * 9
    entry = next(e for e in document["certificate"] if e["property"] == "cells-exact")
    entry["engine"] = "none"
    path = forge(tmp_path / "NONE.cfsm", document)
    with pytest.raises(ArtifactError, match=r"'cells-exact' names engine 'none', which cannot prove it when the table"):
        load_artifact(path)


def _at(key, index, value):
    def change(document):
        document["table"]["refinement"][key][index] = value

    return change


def _spec(change):
    def apply(document):
        change(document["spec"])

    return apply


BAD = [
    (
        lambda d: d["table"]["refinement"].update(extra=1),
        r"payload\.table\.refinement\.extra is not a field of artifact format 2 \(expected only allowed, cells, proposal, status, trees, version\)",
    ),
    (lambda d: d["table"].update(refined=1), r"payload\.table\.refined is not a field of an artifact's table"),
    (lambda d: d["table"].update(refinement=None), r"payload\.table\.refinement is null, expected an object"),
    (
        lambda d: d["table"]["refinement"].update(version=2),
        r"payload\.table\.refinement\.version=2 is not refinement format 1",
    ),
    (_spec(lambda s: s.pop("refine")), r"payload\.table\.refinement is present but payload\.spec has no refine object"),
    (
        _spec(lambda s: s["refine"].update(max_depth=0)),
        r"payload\.spec\.refine\.max_depth=0 is not an integer from 1 to 24",
    ),
    (
        lambda d: d["table"]["refinement"].update(cells=[]),
        r"payload\.table\.refinement\.cells has 0 entries, expected at least 1",
    ),
    (
        lambda d: d["table"]["refinement"].update(cells=[6, 3]),
        r"payload\.table\.refinement\.cells\[1\]=3 is not above payload\.table\.refinement\.cells\[0\]=6; list refined cells ascending",
    ),
    (
        lambda d: d["table"]["refinement"].update(cells=[3, 9]),
        r"payload\.table\.refinement\.cells\[1\]=9 is not a cell index 0\.\.8",
    ),
    (
        lambda d: d["table"]["refinement"]["trees"].pop(),
        r"payload\.table\.refinement\.trees has 1 entries but payload\.table\.refinement\.cells has 2",
    ),
    (
        lambda d: d["table"]["refinement"].update(status="eeecx"),
        r"payload\.table\.refinement\.status\[4\]='x' is neither 'e' \(exact\), 'c' \(conservative\) nor 'u' \(undecided\)",
    ),
    (_at("proposal", 0, 3), r"payload\.table\.refinement\.proposal\[0\]=3 is not an output index 0\.\.2"),
    (
        lambda d: d["table"].update(status="eeeeeecee", proposal=[0, 1, 1, 2, 2, 0, 0, 0, 1]),
        r"payload\.table\.status\[3\]='e' in cell 3 \(bins 1, 0\), which payload\.table\.refinement\.cells\[0\] refines; a refined cell's own entry is conservative",
    ),
    (
        lambda d: d["table"]["refinement"]["trees"][1].__setitem__(0, ["split", 0, 48]),
        r"payload\.table\.refinement\.trees\[1\]\[0\]: the threshold 3\.0 on input 0 is not strictly inside the node's interval \[2\.0, 3\.0\], so a part would be empty; move the threshold inside or drop the split \(cell 6 \(bins 2, 0\)\)",
    ),
    (
        lambda d: d["table"]["refinement"]["trees"][1].__setitem__(0, ["split", 0, 40.0]),
        r"payload\.table\.refinement\.trees\[1\]\[0\]\[2\]=40\.0 is not an integer; a threshold on an input with frac_bits=4",
    ),
    (
        lambda d: d["table"]["refinement"]["trees"][0].__setitem__(0, ["split", 1, 2]),
        r"payload\.table\.refinement\.trees\[0\]\[0\]\[2\]=2 is not a finite float",
    ),
    (
        lambda d: d["table"]["refinement"]["trees"][0].__setitem__(0, ["split", 1, 2.5, 0]),
        r"payload\.table\.refinement\.trees\[0\]\[0\]=\['split', 1, 2\.5, 0\] is not a node",
    ),
    (
        _spec(lambda s: s["refine"].update(max_depth=1)),
        r"payload\.table\.refinement\.trees\[1\]\[2\] splits at depth 1, so its leaves would lie deeper than max_depth=1",
    ),
    (
        _spec(lambda s: s["refine"].update(max_leaves=2)),
        r"payload\.table\.refinement\.trees\[1\]\[4\] is leaf 3 of its tree, more than max_leaves=2",
    ),
    (
        lambda d: d["table"]["refinement"].update(trees=[[["leaf", 0]], REFINEMENT["trees"][1]]),
        r"payload\.table\.refinement\.trees\[0\] is a single leaf: cell 3 \(bins 1, 0\) is not refined",
    ),
    (
        lambda d: (
            [d["table"]["refinement"][k].append(v) for k, v in (("proposal", 0), ("allowed", 7))]
            and d["table"]["refinement"].update(status="eeecuc")
        ),
        r"payload\.table\.refinement\.proposal has 6 leaves but payload\.table\.refinement\.trees number 5",
    ),
    (
        _at("allowed", 3, 6),
        r"payload\.table\.refinement\.allowed\[3\]=6 does not allow the conservative token KEEP in leaf 3 \(a in \[2\.5, 3\.0\]; b in \[0\.0, 5\.0\)\) of cell 6 \(bins 2, 0\); the fallback must be allowed in every leaf",
    ),
    (_at("allowed", 3, 15), r"payload\.table\.refinement\.allowed\[3\]=15 is not a bitmask over 3 outputs"),
    (
        lambda d: [_at("proposal", 2, 2)(d), _at("allowed", 2, 3)(d)],
        r"payload\.table\.refinement\.proposal\[2\]=2 \(TURBO\) is not allowed in leaf 2 \(a in \[2\.0, 2\.5\); b in \[0\.0, 10\.0\)\) of cell 6 \(bins 2, 0\) \(allowed there: KEEP, FAST\)",
    ),
    (
        _at("proposal", 4, 1),
        r"payload\.table\.refinement\.proposal\[4\]=1 \(FAST\) in leaf 4 .* whose status is undecided; such a leaf holds the conservative token 0 \(KEEP\)",
    ),
    (
        _at("allowed", 2, 3),
        r"payload\.table\.refinement\.allowed\[2\]=3 in leaf 2 \(a in \[2\.0, 2\.5\); b in \[0\.0, 10\.0\)\) of cell 6 \(bins 2, 0\) differs from the mask 7 that the spec's legality rules give for the leaf's own box \(allowed there: KEEP, FAST, TURBO\)",
    ),
]


@pytest.mark.parametrize("change, message", BAD, ids=[str(k) for k in range(len(BAD))])
def test_each_bad_refinement_is_refused_with_its_message(tmp_path, change, message):
    document = refined()
    change(document)
    path = forge(tmp_path / "BAD.cfsm", document)
    with pytest.raises(ArtifactError, match=refusal(path, message + ".*")):
        load_artifact(path)
    with pytest.raises(ArtifactError, match=rf"^artifact payload: {message}"):
        build_artifact(document)


def test_a_leaf_inside_a_rule_box_gets_the_rules_tighter_mask(tmp_path):
    """Rule no-turbo-when-hot forbids TURBO for b >= 20: cell 2 (a in [0, 1), b in [20, 30]) split at b = 25 has two
    leaves inside the rule box, each with mask 3; a leaf claiming TURBO there is refused."""
    document = refined(
        cells=[2],
        trees=[[["split", 1, 25.0], ["leaf", 0], ["leaf", 1]]],
        proposal=[1, 0],
        status="ec",
        allowed=[3, 3],
    )
    document["table"]["proposal"][2:4] = [0, 2]  # cell 2 refined (its entry conservative), cell 3 flat again
    document["table"]["status"] = "eeceeecee"
    path = tmp_path / "RULE.cfsm"
    write_artifact(path, document)
    document["table"]["refinement"]["allowed"] = [7, 3]
    with pytest.raises(ArtifactError, match=r"allowed\[0\]=7 .* differs from the mask 3 .*: .*KEEP, FAST\)"):
        build_artifact(document)


# ------------------------------------------------------------------ every reader decides by the leaves


def test_the_runtime_runs_a_refined_artifact_by_its_leaves(refined_path):
    """Cell 3's own entry is the conservative KEEP; its leaves propose TURBO below b = 2.5 and FAST above."""
    from certfsm import runtime

    controller = runtime.load(refined_path, sla=False)
    assert controller.decide_many([[1.5, 2.4], [1.5, 2.5], [0.5, 25.0]]).tolist() == [2, 1, 1]
    decisions = [controller.step([1.5, 2.4]) for _ in range(3)]
    assert [d.token for d in decisions] == ["KEEP", "KEEP", "TURBO"] and {d.cell for d in decisions} == {3}
    assert Controller(Machine.from_artifact(load_artifact(refined_path))).step([2.75, 7.5]).token == "KEEP"


def test_the_verilog_and_c_export_take_a_refined_artifact_as_they_take_a_flat_one(refined_path):
    """Nothing refuses the refinement: the hardware needs frac_bits on every input (b has none here), as for a flat
    table (tests/hdl_export exports refined tables)."""
    machine = Machine.from_artifact(load_artifact(refined_path))
    with pytest.raises(SpecError, match=r"^inputs\[1\] \(b\) has no frac_bits"):
        hardware_of(machine, "refined")


def test_a_flat_machine_passes_the_same_gates(tmp_path):
    path = tmp_path / "FLAT.cfsm"
    write_artifact(path, PAYLOAD)
    Controller(Machine.from_artifact(load_artifact(path)))


# ------------------------------------------------------------------ the spec's refine object


def spec_document(**extra):
    return {
        "certfsm_spec": 1,
        "name": "r",
        "model": "m.onnx",
        "inputs": [{"name": "a", "unit": "", "min": 0, "max": 1, "bins": 2}],
        "outputs": ["A", "B"],
        "tokens": {"A": 0, "B": 1},
        "legal_tokens": ["A", "B"],
        "decision": "argmax",
        "conservative_token": "A",
        **extra,
    }


def test_the_spec_reads_refine_and_writes_it_back_only_when_given():
    plain = spec_from_dict(spec_document(), "/x/spec.json", require_model=False)
    assert plain.refine is None and "refine" not in plain.to_json()
    spec = spec_from_dict(spec_document(refine={"max_depth": 6, "max_leaves": 40}), "/x/spec.json", require_model=False)
    assert (spec.refine.max_depth, spec.refine.max_leaves) == (6, 40)
    assert spec.to_json()["refine"] == {"max_depth": 6, "max_leaves": 40}


@pytest.mark.parametrize(
    "refine, message",
    [
        ({"max_depth": 0, "max_leaves": 4}, r"refine\.max_depth: 0 is less than the minimum of 1; expected: The most"),
        ({"max_depth": 25, "max_leaves": 4}, r"refine\.max_depth: 25 is greater than the maximum of 24; expected: "),
        ({"max_depth": 3, "max_leaves": 1}, r"refine\.max_leaves: 1 is less than the minimum of 2; expected: The most"),
        ({"max_depth": 3}, r"refine\.max_leaves: required field is missing; add it \(The most leaves"),
        ({"max_depth": 3, "max_leaves": 4, "s": 1}, r"refine\.s: unknown field; remove it or fix the spelling"),
    ],
)
def test_a_bad_refine_object_is_one_line_naming_it(refine, message):
    with pytest.raises(SpecError, match=rf"^/x/spec\.json: {message}") as caught:
        spec_from_dict(spec_document(refine=refine), "/x/spec.json", require_model=False)
    assert "\n" not in str(caught.value)


def test_the_schema_states_the_budgets_limits_from_their_home():
    import importlib.resources

    schema = json.loads(importlib.resources.files("certfsm").joinpath("spec.schema.json").read_text())
    refine = schema["properties"]["refine"]["properties"]
    assert refine["max_depth"]["maximum"] == MAX_TREE_DEPTH and refine["max_leaves"]["maximum"] == MAX_TREE_LEAVES
    assert re.search(rf"1\.\.{MAX_TREE_DEPTH}\)", refine["max_depth"]["description"])
