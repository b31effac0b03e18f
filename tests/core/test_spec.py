"""The controller spec: loading, materialised edges, canonical round trip, and one pinned message per bad spec."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle
import subprocess
import sys

import jsonschema
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._decision import DECISION_RULES, margin_from_probability
from certfsm._errors import SpecError
from certfsm._spec_reading import check_spec, load_spec, spec_from_dict
from certfsm.machine import uniform_edges

VALID = {
    "certfsm_spec": 1,
    "name": "coadapt-example",
    "description": "free text",
    "model": "coadapt.onnx",
    "inputs": [
        {"name": "compute_util", "unit": "%", "min": 0, "max": 100, "bins": 8, "frac_bits": 8},
        {
            "name": "temperature",
            "unit": "degC",
            "min": 20,
            "max": 110,
            "edges": [20, 40, 60, 85, 95, 110],
            "frac_bits": 6,
        },
        {"name": "queue_depth", "unit": "entries", "min": 0, "max": 64, "bins": 4},
    ],
    "outputs": ["KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU", "SPARSE_2_4"],
    "tokens": {"KEEP": 0, "FUSE_CONV": 1, "INT4": 2, "OFFLOAD_CPU": 3, "SPARSE_2_4": 4},
    "legal_tokens": ["KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU"],
    "decision": "argmax",
    "conservative_token": "KEEP",
    "confidence_gate": {"margin": 0.5},
    "legality_rules": [
        {"name": "no-int4-when-hot", "when": {"temperature": {"min": 85}}, "forbid": ["INT4"]},
        {"name": "no-offload-when-queue-full", "when": {"queue_depth": {"min": 56}}, "forbid": ["OFFLOAD_CPU"]},
    ],
    "hysteresis": {"confirm_cycles": 3, "cooldown_cycles": 8},
    "sla": {
        "paths": [
            {
                "name": "inference",
                "metric": "latency_ms",
                "limit": 20.0,
                "window": 16,
                "max_violations": 2,
                "recovery_cycles": 32,
            }
        ]
    },
    "overrides": {"overridable": ["KEEP", "OFFLOAD_CPU"]},
}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder holding the placeholder model, as the current directory (so messages start with 'spec.json')."""
    (tmp_path / "coadapt.onnx").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_spec(folder, document, name="spec.json"):
    text = document if isinstance(document, str) else json.dumps(document, indent=2)
    (folder / name).write_text(text, encoding="utf-8")
    return name


def doc(**changes):
    document = copy.deepcopy(VALID)
    document.update(changes)
    return document


# ---------------------------------------------------------------- valid specs


def test_valid_spec_loads_with_every_field(workdir):
    spec = load_spec(write_spec(workdir, VALID))
    assert spec.path == workdir / "spec.json"
    assert spec.model_path == workdir / "coadapt.onnx"
    assert (spec.name, spec.description, spec.decision) == ("coadapt-example", "free text", "argmax")
    assert [i.name for i in spec.inputs] == ["compute_util", "temperature", "queue_depth"]
    assert spec.inputs[1].edges == (20.0, 40.0, 60.0, 85.0, 95.0, 110.0)
    assert [i.frac_bits for i in spec.inputs] == [8, 6, None]
    assert dict(spec.tokens) == VALID["tokens"]
    assert spec.legal_tokens == ("KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU")
    assert (spec.n_inputs, spec.n_outputs) == (3, 5)
    assert [spec.is_legal_index(k) for k in range(5)] == [True, True, True, True, False]
    assert spec.output_index("OFFLOAD_CPU") == 3 and spec.conservative_index == 0
    assert spec.margin == 0.5 and spec.probability is None
    assert (spec.confirm_cycles, spec.cooldown_cycles) == (3, 8)
    assert spec.sla_paths[0].window == 16 and spec.sla_paths[0].max_violations == 2
    assert spec.overridable == ("KEEP", "OFFLOAD_CPU")
    np.testing.assert_array_equal(spec.envelope_lower, [0, 20, 0])
    np.testing.assert_array_equal(spec.envelope_upper, [100, 110, 64])
    assert not spec.envelope_lower.flags.writeable


def test_spec_is_frozen_and_picklable(workdir):
    spec = load_spec(write_spec(workdir, VALID))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.margin = 1.0
    with pytest.raises(TypeError, match=r"^a ControllerSpec mapping is read-only"):
        spec.tokens["KEEP"] = 7
    assert isinstance(spec.tokens, dict) and json.loads(json.dumps(spec.tokens)) == VALID["tokens"]
    clone = pickle.loads(pickle.dumps(spec))
    assert clone == spec and clone.output_index("INT4") == 2
    changed = dataclasses.replace(spec, legal_tokens=("KEEP",))
    assert changed.tokens == spec.tokens and not changed.is_legal_index(1)


def test_rule_boxes_are_full_dimension_and_clipped_to_the_envelope(workdir):
    rules = [
        {"name": "hot", "when": {"temperature": {"min": 85}}, "forbid": ["INT4", "FUSE_CONV"]},
        {
            "name": "wide",
            "when": {"temperature": {"min": -500, "max": 500}, "compute_util": {"max": 10}},
            "forbid": ["OFFLOAD_CPU"],
        },
        {"name": "everywhere", "when": {}, "forbid": ["SPARSE_2_4"]},
        {"name": "edge-point", "when": {"queue_depth": {"min": 64, "max": 99}}, "forbid": ["INT4"]},
    ]
    spec = load_spec(write_spec(workdir, doc(legality_rules=rules)))
    hot, wide, everywhere, point = spec.rules
    assert (hot.lower, hot.upper) == ((0.0, 85.0, 0.0), (100.0, 110.0, 64.0))
    assert hot.forbid == ("FUSE_CONV", "INT4")
    assert spec.forbidden_indices(hot) == (1, 2)
    assert (wide.lower, wide.upper) == ((0.0, 20.0, 0.0), (10.0, 110.0, 64.0))
    assert (everywhere.lower, everywhere.upper) == ((0.0, 20.0, 0.0), (100.0, 110.0, 64.0))
    assert (point.lower[2], point.upper[2]) == (64.0, 64.0)


def test_bins_materialise_equal_width_edges_with_exact_endpoints(workdir):
    inputs = [
        {"name": "x", "unit": "", "min": 0.1, "max": 0.7, "bins": 3},
        {"name": "y", "unit": "", "min": -1, "max": 1, "bins": 1},
    ]
    spec = load_spec(write_spec(workdir, doc(inputs=inputs, legality_rules=[])))
    x, y = spec.inputs
    assert x.edges[0] == 0.1 and x.edges[-1] == 0.7 and x.n_bins == 3
    np.testing.assert_allclose(x.edges, [0.1, 0.3, 0.5, 0.7], rtol=0, atol=1e-15)
    assert y.edges == (-1.0, 1.0)


@settings(max_examples=examples(100), deadline=None)
@given(low=st.floats(-1e6, 1e6), width=st.floats(5e-324, 1e6), bins=st.integers(1, 64))
def test_materialised_edges_are_strictly_increasing_or_refused(low, width, bins):
    high = low + width
    if not high > low:
        return
    document = doc(inputs=[{"name": "x", "unit": "", "min": low, "max": high, "bins": bins}], legality_rules=[])
    try:
        spec = spec_from_dict(document, "spec.json", require_model=False)
    except SpecError as error:
        assert str(error).startswith("spec.json: inputs[0].bins=")
        return
    edges = spec.inputs[0].edges
    assert len(edges) == bins + 1 and edges[0] == low and edges[-1] == high
    assert all(a < b for a, b in zip(edges, edges[1:]))


def test_probability_gate_converts_to_the_logit_margin(workdir):
    spec = load_spec(write_spec(workdir, doc(confidence_gate={"probability": 0.9})))
    assert spec.probability == 0.9
    assert spec.margin == margin_from_probability(0.9, 5)
    assert spec.margin == pytest.approx(math.log(4 * 0.9 / 0.1))
    assert spec.to_json()["confidence_gate"] == {"probability": 0.9}


def test_optional_sections_take_their_defaults(workdir):
    document = doc()
    for key in ("description", "confidence_gate", "legality_rules", "hysteresis", "sla", "overrides"):
        del document[key]
    spec = load_spec(write_spec(workdir, document))
    assert (spec.description, spec.margin, spec.probability, spec.rules) == ("", None, None, ())
    assert (spec.confirm_cycles, spec.cooldown_cycles, spec.sla_paths, spec.overridable) == (1, 0, (), ())
    assert "confidence_gate" not in spec.to_json()


@pytest.mark.parametrize("gate", [{"margin": 0.5}, {"probability": 0.75}, None])
def test_to_json_round_trips_through_load(workdir, gate, spec_schema):
    document = doc(
        legality_rules=[
            {"name": "hot", "when": {"temperature": {"min": 85, "max": 1000}}, "forbid": ["INT4"]},
            {"name": "any", "when": {}, "forbid": ["SPARSE_2_4"]},
            {"name": "busy", "when": {"compute_util": {"min": 50, "max": 90}}, "forbid": ["OFFLOAD_CPU", "FUSE_CONV"]},
        ]
    )
    if gate is None:
        del document["confidence_gate"]
    else:
        document["confidence_gate"] = gate
    spec = load_spec(write_spec(workdir, document))
    canonical = spec.to_json()
    jsonschema.Draft202012Validator(spec_schema).validate(canonical)
    again = load_spec(write_spec(workdir, canonical, "again.json"))
    assert dataclasses.replace(again, path=spec.path) == spec
    assert again.to_json() == canonical
    assert canonical["inputs"][0]["edges"] == list(spec.inputs[0].edges)
    assert canonical["legality_rules"][0]["when"] == {"temperature": {"min": 85.0}}
    assert canonical["legality_rules"][2]["forbid"] == ["FUSE_CONV", "OFFLOAD_CPU"]


def test_sla_tokens_and_statistic_round_trip_and_leave_defaults_out(workdir):
    paths = [
        {
            "name": "int4",
            "metric": "latency_ms",
            "limit": 25,
            "window": 8,
            "max_violations": 1,
            "recovery_cycles": 4,
            "tokens": ["INT4", "FUSE_CONV"],
            "statistic": "p95",
        },
        {
            "name": "all",
            "metric": "latency_ms",
            "limit": 30,
            "window": 8,
            "max_violations": 1,
            "recovery_cycles": 0,
            "tokens": ["OFFLOAD_CPU", "INT4", "KEEP", "FUSE_CONV"],
            "statistic": "value",
        },
        {
            "name": "mean",
            "metric": "energy_mj",
            "limit": 2.5,
            "window": 4,
            "max_violations": 0,
            "recovery_cycles": 2,
            "statistic": "mean",
        },
    ]
    spec = load_spec(write_spec(workdir, doc(sla={"paths": paths})))
    int4, every, mean = spec.sla_paths
    assert (int4.tokens, int4.statistic) == (("FUSE_CONV", "INT4"), "p95")
    assert (every.tokens, every.statistic) == (None, "value")
    assert (mean.tokens, mean.statistic) == (None, "mean")
    canonical = spec.to_json()["sla"]["paths"]
    assert canonical[0]["tokens"] == ["FUSE_CONV", "INT4"] and canonical[0]["statistic"] == "p95"
    assert "tokens" not in canonical[1] and "statistic" not in canonical[1]
    assert "tokens" not in canonical[2] and canonical[2]["statistic"] == "mean"
    again = load_spec(write_spec(workdir, spec.to_json(), "again.json"))
    assert dataclasses.replace(again, path=spec.path) == spec
    assert load_spec(write_spec(workdir, VALID)).to_json()["sla"] == VALID["sla"]
    lines = check_spec("again.json")
    assert (
        "  int4: p95(latency_ms) <= 25, at most 1 violations per 8 cycles, recovery 4 cycles, on FUSE_CONV, INT4 only"
    ) in lines
    assert "  all: latency_ms <= 30, at most 1 violations per 8 cycles, recovery 0 cycles" in lines


def test_list_order_of_token_sets_does_not_matter(workdir):
    first = load_spec(write_spec(workdir, VALID))
    shuffled = doc(
        legal_tokens=["OFFLOAD_CPU", "INT4", "KEEP", "FUSE_CONV"], overrides={"overridable": ["OFFLOAD_CPU", "KEEP"]}
    )
    assert load_spec(write_spec(workdir, shuffled)) == first


def test_model_path_resolution(workdir):
    (workdir / "models").mkdir()
    (workdir / "models" / "net.onnx").write_bytes(b"")
    (workdir / "specs").mkdir()
    relative = load_spec(write_spec(workdir, doc(model="../models/net.onnx"), "specs/spec.json"))
    assert relative.model_path == workdir / "models" / "net.onnx"
    absolute = load_spec(write_spec(workdir, doc(model=str(workdir / "models" / "net.onnx"))))
    assert absolute.model_path == relative.model_path
    assert absolute.to_json()["model"] == "models/net.onnx"


def test_spec_from_dict_can_skip_only_the_model_check(tmp_path):
    spec = spec_from_dict(doc(model="nowhere.onnx"), tmp_path / "spec.json", require_model=False)
    assert spec.model_path == tmp_path / "nowhere.onnx"
    with pytest.raises(
        SpecError, match=r"^.*spec\.json: model='nowhere\.onnx' resolves to .*nowhere\.onnx, which does not exist"
    ):
        spec_from_dict(doc(model="nowhere.onnx"), tmp_path / "spec.json")
    with pytest.raises(SpecError, match=r"^.*spec\.json: inputs\[0\]\.bins: 0 is less than the minimum of 1; "):
        bad = doc()
        bad["inputs"][0]["bins"] = 0
        spec_from_dict(bad, tmp_path / "spec.json", require_model=False)


def test_output_index_of_an_unknown_token_names_the_outputs(workdir):
    spec = load_spec(write_spec(workdir, VALID))
    with pytest.raises(SpecError, match=r"^.*spec\.json: token 'INT8' is not one of outputs \(KEEP, FUSE_CONV, INT4, "):
        spec.output_index("INT8")


def test_check_spec_summarises_inputs_tokens_rules_and_gate(workdir):
    lines = check_spec(write_spec(workdir, doc(confidence_gate={"probability": 0.9})))
    text = "\n".join(lines)
    assert (
        "  compute_util [%]: 0 .. 100, 8 bins (edges 0, 12.5, 25, 37.5, 50, 62.5, 75, 87.5, 100), frac_bits 8" in lines
    )
    assert "  4: SPARSE_2_4 = code 4 (NOT legal: must provably never win)" in lines
    assert "  0: KEEP = code 0 (conservative)" in lines
    assert f"confidence gate: probability 0.9 -> logit margin {math.log(36):.6g}" in lines
    assert "  no-int4-when-hot: forbid INT4 where temperature in [85, 110]" in lines
    assert "grid: 8 x 5 x 4 = 160 cells" in lines
    assert "hysteresis: confirm 3 cycles, cooldown 8 cycles" in text
    with pytest.raises(SpecError, match=r"^nothere\.json: no such file"):
        check_spec("nothere.json")


# ---------------------------------------------------------------- the schema


def test_schema_is_valid_and_documents_every_field(spec_schema):
    schema = spec_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert tuple(schema["properties"]["decision"]["enum"]) == DECISION_RULES
    undocumented = []

    def walk(node, where):
        if "description" not in node and list(node) != ["$ref"]:
            undocumented.append(where)
        for key, child in node.get("properties", {}).items():
            walk(child, f"{where}.{key}")
        for key in ("items", "additionalProperties", "propertyNames"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{where}.{key}")

    walk(schema, "$")
    for name, definition in schema["$defs"].items():
        walk(definition, f"$defs.{name}")
    assert undocumented == []


def test_schema_forbids_unknown_keys_in_every_object(spec_schema):
    schema = spec_schema
    open_objects = []

    def walk(node, where):
        if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
            open_objects.append(where)
        for key, child in node.get("properties", {}).items():
            walk(child, f"{where}.{key}")

    walk(schema, "$")
    for name, definition in schema["$defs"].items():
        walk(definition, f"$defs.{name}")
    assert open_objects == []


def test_spec_module_imports_no_heavy_package():
    code = "import sys, certfsm._spec; heavy = {'onnx', 'maraboupy', 'z3'} & set(sys.modules); assert not heavy, heavy"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- bad specs


def edit(change):
    """A bad document: VALID with `change(document)` applied."""

    def make():
        document = copy.deepcopy(VALID)
        change(document)
        return document

    return make


def text(raw):
    return lambda: raw


def set_at(path, value):
    def change(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        document[last] = value

    return edit(change)


def drop(*path):
    def change(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        del document[last]

    return edit(change)


def rule(**fields):
    base = {"name": "r", "when": {"temperature": {"min": 85}}, "forbid": ["INT4"]}
    base.update(fields)
    return set_at(("legality_rules",), [base])


BAD_SPECS = [
    # plain JSON
    (
        "invalid-json",
        text('{\n  "name": "x",\n  "model" "m.onnx"\n}'),
        r"^spec\.json: line 3, column 11: invalid JSON \(Expecting ':' delimiter\); fix the JSON syntax there$",
    ),
    (
        "trailing-comma",
        text('{"a": [1, 2,]}'),
        r"^spec\.json: line 1, column 13: invalid JSON \(Expecting value\); fix the JSON syntax there$",
    ),
    (
        "repeated-key",
        text('{"tokens": {"KEEP": 0, "KEEP": 1}}'),
        r"^spec\.json: tokens\.KEEP: key 'KEEP' appears more than once in the same object \(JSON keeps only the last\); keep one$",
    ),
    (
        "nan",
        text('{"inputs": [{"min": NaN}]}'),
        r"^spec\.json: inputs\[0\]\.min: nan is not a finite number \(JSON has no NaN or Infinity\); give a finite number$",
    ),
    (
        "huge-int",
        text('{"limit": 1' + "0" * 400 + "}"),
        r"^spec\.json: limit: 10{56}\.\.\. is too large for a float64; give a smaller number$",
    ),
    # limits checked before the work they bound (fuzzing found each of these crashing or hanging)
    (
        "integer-beyond-the-digit-limit",
        text('{"limit": 9' + "9" * 5000 + "}"),
        r"^spec\.json: limit: 9{57}\.\.\. is too large for a float64; give a smaller number$",
    ),
    (
        "real-beyond-float64",
        text('{"inputs": [{"max": -1.5e400}]}'),
        r"^spec\.json: inputs\[0\]\.max: -1\.5e400 is too large for a float64; give a smaller number$",
    ),
    (
        "deep-nesting",
        text('{\n"name": "x",\n"zz": ' + "[" * 3000 + "]" * 3000 + "}"),
        r"^spec\.json: line 3: nesting deeper than 32 levels; a controller spec nests 5 levels, remove the extra ",
    ),
    (
        "too-many-values",
        set_at(("overrides", "overridable"), [1.5] * 100_001),
        r"^spec\.json: overrides\.overridable\[\d+\]: value number 10001 of the spec, more than the 10000 a controller "
        r"spec may hold; shorten its long lists or objects \('bins' replaces long edges\)$",
    ),
    # schema
    (
        "not-an-object",
        text("[]"),
        r"^spec\.json: top level: \[\] is not of type 'object'; expected: A neural controller",
    ),
    (
        "bins-minimum",
        set_at(("inputs", 2, "bins"), -1),
        r"^spec\.json: inputs\[2\]\.bins: -1 is less than the minimum of 1; expected: Number of equal-width bins over \[min, max\]",
    ),
    (
        "unknown-field",
        set_at(("inputs", 0, "mni"), 0),
        r"^spec\.json: inputs\[0\]\.mni: unknown field; remove it or fix the spelling \(allowed here: name, unit, min, max, bins, edges, frac_bits\)$",
    ),
    (
        "unknown-top-level-field-beats-missing",
        edit(lambda d: d.update(modle=d.pop("model"))),
        r"^spec\.json: modle: unknown field; remove it or fix the spelling \(allowed here: certfsm_spec, name, ",
    ),
    (
        "missing-field",
        drop("model"),
        r"^spec\.json: model: required field is missing; add it \(Path of the ONNX model, ",
    ),
    (
        "missing-unit",
        drop("inputs", 1, "unit"),
        r"^spec\.json: inputs\[1\]\.unit: required field is missing; add it \(Physical unit",
    ),
    (
        "wrong-type",
        set_at(("inputs", 1, "min"), "20"),
        r"^spec\.json: inputs\[1\]\.min: '20' is not of type 'number'; expected: Lower end of the operating envelope",
    ),
    (
        "null-edge",
        set_at(("inputs", 1, "edges", 2), None),
        r"^spec\.json: inputs\[1\]\.edges\[2\] is not filled in \(null\); write the value it needs \(a finite "
        r"number\)$",
    ),
    (
        "bool-is-not-int",
        set_at(("hysteresis", "confirm_cycles"), True),
        r"^spec\.json: hysteresis\.confirm_cycles: true is not of type 'integer'; expected: Consecutive cycles",
    ),
    (
        "type-beats-oneOf",
        set_at(("inputs", 0), 7),
        r"^spec\.json: inputs\[0\]: 7 is not of type 'object'; expected: A network input",
    ),
    (
        "enum",
        set_at(("decision",), "max"),
        r"^spec\.json: decision: 'max' is not one of \['argmax', 'argmin'\]; expected: How the network's scores choose a token",
    ),
    (
        "const-version",
        set_at(("certfsm_spec",), 2),
        r"^spec\.json: certfsm_spec: 2 is not supported; expected: Format version of this file; must be 1\.$",
    ),
    (
        "both-bins-and-edges",
        set_at(("inputs", 1, "bins"), 3),
        r"^spec\.json: inputs\[1\]: gives both 'bins' and 'edges'; give exactly one of 'bins' or 'edges'$",
    ),
    (
        "neither-bins-nor-edges",
        drop("inputs", 0, "bins"),
        r"^spec\.json: inputs\[0\]: gives none of 'bins', 'edges'; give exactly one of 'bins' or 'edges'$",
    ),
    (
        "empty-gate",
        set_at(("confidence_gate",), {}),
        r"^spec\.json: confidence_gate: gives none of 'margin', 'probability'; give exactly one of 'margin' or 'probability'$",
    ),
    (
        "pattern",
        set_at(("inputs", 0, "name"), "3d"),
        r"^spec\.json: inputs\[0\]\.name: '3d' does not match '\^\[A-Za-z_\]\[A-Za-z0-9_\]\*\$'; expected: An identifier",
    ),
    (
        "min-items",
        set_at(("outputs",), ["KEEP"]),
        r"^spec\.json: outputs: needs at least 2 entries, got 1; expected: Token name of each network output index",
    ),
    (
        "empty-legal-tokens",
        set_at(("legal_tokens",), []),
        r"^spec\.json: legal_tokens: needs at least 1 entries, got 0; expected: ",
    ),
    (
        "unique-items",
        set_at(("legal_tokens",), ["KEEP", "INT4", "KEEP"]),
        r"^spec\.json: legal_tokens: 'KEEP' appears more than once; list each entry once$",
    ),
    (
        "code-maximum",
        set_at(("tokens", "SPARSE_2_4"), 16),
        r"^spec\.json: tokens\.SPARSE_2_4: 16 is greater than the maximum of 15; expected: A 4-bit token code",
    ),
    (
        "probability-exclusive-maximum",
        set_at(("confidence_gate",), {"probability": 1}),
        r"^spec\.json: confidence_gate\.probability: 1 is greater than or equal to the maximum of 1; expected: Softmax probability",
    ),
    (
        "negative-margin",
        set_at(("confidence_gate",), {"margin": -0.1}),
        r"^spec\.json: confidence_gate\.margin: -0\.1 is less than the minimum of 0; expected: Logit margin",
    ),
    (
        "sla-limit",
        set_at(("sla", "paths", 0, "limit"), 0),
        r"^spec\.json: sla\.paths\[0\]\.limit: 0 is less than or equal to the minimum of 0; expected: Largest acceptable value",
    ),
    (
        "sla-statistic",
        set_at(("sla", "paths", 0, "statistic"), "p90"),
        r"^spec\.json: sla\.paths\[0\]\.statistic: 'p90' is not one of \['value', 'p50', 'p95', 'p99', 'mean'\]; expected: Optional\. What is compared with limit",
    ),
    (
        "sla-tokens-empty",
        set_at(("sla", "paths", 0, "tokens"), []),
        r"^spec\.json: sla\.paths\[0\]\.tokens: needs at least 1 entries, got 0; expected: Optional\. The decision paths the SLA applies to",
    ),
    (
        "sla-tokens-repeated",
        set_at(("sla", "paths", 0, "tokens"), ["INT4", "INT4"]),
        r"^spec\.json: sla\.paths\[0\]\.tokens: 'INT4' appears more than once; list each entry once$",
    ),
    (
        "sla-tokens-not-a-list",
        set_at(("sla", "paths", 0, "tokens"), "INT4"),
        r"^spec\.json: sla\.paths\[0\]\.tokens: 'INT4' is not of type 'array'; expected: A list of distinct token names",
    ),
    (
        "unknown-range-key",
        set_at(("legality_rules", 0, "when", "temperature"), {"mn": 85}),
        r"^spec\.json: legality_rules\[0\]\.when\.temperature\.mn: unknown field; remove it or fix the spelling \(allowed here: min, max\)$",
    ),
    (
        "first-error-in-document-order",
        edit(lambda d: (d["inputs"][2].update(bins=0), d.update(decision="max"))),
        r"^spec\.json: inputs\[2\]\.bins: 0 is less than the minimum of 1; ",
    ),
    # semantics
    (
        "max-below-min",
        set_at(("inputs", 2), {"name": "q", "unit": "", "min": 1.0, "max": 0.5, "bins": 2}),
        r"^spec\.json: inputs\[2\]\.max=0\.5 is below inputs\[2\]\.min=1\.0; swap them or fix the range$",
    ),
    (
        "max-equals-min",
        set_at(("inputs", 0, "max"), 0),
        r"^spec\.json: inputs\[0\]\.max=0 equals inputs\[0\]\.min=0; the envelope needs min < max, widen the range$",
    ),
    (
        "bins-too-fine",
        set_at(("inputs", 0), {"name": "x", "unit": "", "min": 0, "max": 1e-320, "bins": 100000}),
        r"^spec\.json: inputs\[0\]\.bins=100000 gives bins that hold no float64 reading over \[0, 1e-320\] \(the range is too narrow for that many\); use fewer bins",
    ),
    (
        "first-edge",
        set_at(("inputs", 1, "edges", 0), 10),
        r"^spec\.json: inputs\[1\]\.edges\[0\]=10 differs from inputs\[1\]\.min=20; the first edge must equal min$",
    ),
    (
        "last-edge",
        set_at(("inputs", 1, "edges", 5), 100.5),
        r"^spec\.json: inputs\[1\]\.edges\[5\]=100\.5 differs from inputs\[1\]\.max=110; the last edge must equal max$",
    ),
    (
        "edges-not-increasing",
        set_at(("inputs", 1, "edges"), [20, 60, 60, 110]),
        r"^spec\.json: inputs\[1\]\.edges\[2\]=60 is not above inputs\[1\]\.edges\[1\]=60; edges must be strictly increasing$",
    ),
    (
        "duplicate-input",
        set_at(("inputs", 2, "name"), "compute_util"),
        r"^spec\.json: inputs\[2\]\.name='compute_util' repeats inputs\[0\]\.name; give each one its own name$",
    ),
    (
        "duplicate-output",
        set_at(("outputs",), ["KEEP", "INT4", "KEEP"]),
        r"^spec\.json: outputs\[2\]='KEEP' repeats outputs\[0\]; give each one its own name$",
    ),
    (
        "token-without-code",
        drop("tokens", "SPARSE_2_4"),
        r"^spec\.json: tokens has no code for outputs\[4\]='SPARSE_2_4'; add \"SPARSE_2_4\": <code 0\.\.15> to tokens$",
    ),
    (
        "code-without-output",
        set_at(("tokens", "INT8"), 9),
        r"^spec\.json: tokens\.INT8 names no output \(outputs: KEEP, FUSE_CONV, INT4, OFFLOAD_CPU, SPARSE_2_4\); remove it or add 'INT8' to outputs$",
    ),
    (
        "duplicate-code",
        set_at(("tokens", "INT4"), 1),
        r"^spec\.json: tokens\.INT4=1 repeats the code of tokens\.FUSE_CONV; give each token its own 4-bit code \(unused: 2, 5, 6, ",
    ),
    (
        "unknown-legal-token",
        set_at(("legal_tokens",), ["KEEP", "INT8"]),
        r"^spec\.json: legal_tokens\[1\]='INT8' is not a known token \(known: KEEP, FUSE_CONV, INT4, OFFLOAD_CPU, SPARSE_2_4\); use a name from outputs$",
    ),
    (
        "unknown-conservative",
        set_at(("conservative_token",), "IDLE"),
        r"^spec\.json: conservative_token='IDLE' is not a known token \(known: KEEP, ",
    ),
    (
        "illegal-conservative",
        set_at(("conservative_token",), "SPARSE_2_4"),
        r"^spec\.json: conservative_token='SPARSE_2_4' is not in legal_tokens \(KEEP, FUSE_CONV, INT4, OFFLOAD_CPU\); pick a legal fallback token",
    ),
    (
        "probability-below-one-over-k",
        set_at(("confidence_gate",), {"probability": 0.1}),
        r"^spec\.json: confidence_gate\.probability=0\.1 gives the negative logit margin -0\.81093: with K=5 outputs the top softmax probability is always at least 1/K=0\.2; ",
    ),
    (
        "duplicate-rule",
        set_at(("legality_rules", 1, "name"), "no-int4-when-hot"),
        r"^spec\.json: legality_rules\[1\]\.name='no-int4-when-hot' repeats legality_rules\[0\]\.name; give each one its own name$",
    ),
    (
        "rule-unknown-input",
        rule(when={"fan_speed": {"min": 1}}),
        r"^spec\.json: legality_rules\[0\]\.when\.fan_speed names no input \(inputs: compute_util, temperature, queue_depth\); use one of the input names$",
    ),
    (
        "rule-min-above-max",
        rule(when={"temperature": {"min": 90, "max": 80}}),
        r"^spec\.json: legality_rules\[0\]\.when\.temperature\.min=90 is above legality_rules\[0\]\.when\.temperature\.max=80; swap them$",
    ),
    (
        "rule-outside-envelope",
        rule(when={"temperature": {"min": 120}}),
        r"^spec\.json: legality_rules\[0\]\.when\.temperature=\{\"min\": 120\} misses the envelope \[20, 110\] of inputs\[1\]; the rule could never apply",
    ),
    (
        "rule-below-envelope",
        rule(when={"temperature": {"min": 0, "max": 19.5}}),
        r"^spec\.json: legality_rules\[0\]\.when\.temperature=\{\"min\": 0, \"max\": 19\.5\} misses the envelope \[20, 110\] of inputs\[1\]; ",
    ),
    (
        "forbid-unknown",
        rule(forbid=["INT4", "INT2"]),
        r"^spec\.json: legality_rules\[0\]\.forbid\[1\]='INT2' is not a known token \(known: KEEP, ",
    ),
    (
        "forbid-conservative",
        rule(forbid=["KEEP"]),
        r"^spec\.json: legality_rules\[0\]\.forbid\[0\]='KEEP' is the conservative_token, which the state machine falls back to; ",
    ),
    (
        "duplicate-sla-path",
        edit(lambda d: d["sla"]["paths"].append(dict(d["sla"]["paths"][0]))),
        r"^spec\.json: sla\.paths\[1\]\.name='inference' repeats sla\.paths\[0\]\.name; give each one its own name$",
    ),
    (
        "max-violations-not-below-window",
        set_at(("sla", "paths", 0, "max_violations"), 16),
        r"^spec\.json: sla\.paths\[0\]\.max_violations=16 is not below sla\.paths\[0\]\.window=16, so the path could never be violated; ",
    ),
    (
        "sla-tokens-unknown",
        set_at(("sla", "paths", 0, "tokens"), ["INT4", "INT8"]),
        r"^spec\.json: sla\.paths\[0\]\.tokens\[1\]='INT8' is not a known token \(known: KEEP, FUSE_CONV, INT4, OFFLOAD_CPU, SPARSE_2_4\); use a name from outputs$",
    ),
    (
        "sla-tokens-illegal",
        set_at(("sla", "paths", 0, "tokens"), ["SPARSE_2_4"]),
        r"^spec\.json: sla\.paths\[0\]\.tokens\[0\]='SPARSE_2_4' is not in legal_tokens \(KEEP, FUSE_CONV, INT4, OFFLOAD_CPU\), so the path would never apply; name tokens the machine can emit$",
    ),
    (
        "overridable-unknown",
        set_at(("overrides", "overridable"), ["BOOST"]),
        r"^spec\.json: overrides\.overridable\[0\]='BOOST' is not a known token \(known: KEEP, ",
    ),
    (
        "overridable-illegal",
        set_at(("overrides", "overridable"), ["KEEP", "SPARSE_2_4"]),
        r"^spec\.json: overrides\.overridable\[1\]='SPARSE_2_4' is not in legal_tokens \(KEEP, FUSE_CONV, INT4, OFFLOAD_CPU\); an override may force only legal tokens$",
    ),
    (
        "model-missing",
        set_at(("model",), "missing.onnx"),
        r"^spec\.json: model='missing\.onnx' resolves to /.*/missing\.onnx, which does not exist; put the ONNX file there or fix the model path",
    ),
    (
        "model-name-too-long",
        set_at(("model",), "[" * 5000 + "coadapt.onnx"),
        r"^spec\.json: model='\[{80}' cannot be looked up \(File name too long\); give the path of an ONNX file$",
    ),
    ("model-is-a-folder", set_at(("model",), "."), r"^spec\.json: model='\.' resolves to /.*, which is not a file; "),
]


@pytest.mark.slow
@pytest.mark.parametrize("make, pattern", [case[1:] for case in BAD_SPECS], ids=[case[0] for case in BAD_SPECS])
def test_bad_spec_is_rejected_with_a_pinned_message(workdir, make, pattern):
    write_spec(workdir, make())
    with pytest.raises(SpecError, match=pattern) as caught:
        load_spec("spec.json")
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_missing_spec_file(workdir):
    with pytest.raises(
        SpecError,
        match=r"^absent\.json: no such file \(looked for /.*/absent\.json\); give the path of a controller spec JSON file$",
    ):
        load_spec("absent.json")


def test_spec_path_that_is_a_folder(workdir):
    (workdir / "folder.json").mkdir()
    with pytest.raises(
        SpecError,
        match=r"^folder\.json: cannot read the spec file \(Is a directory\); check that the path names a readable file$",
    ):
        load_spec("folder.json")


def test_spec_that_is_not_utf8(workdir):
    (workdir / "spec.json").write_bytes(b'{"name": "\xff"}')
    with pytest.raises(SpecError, match=r"^spec\.json: byte 10 is not UTF-8 text; save the spec as UTF-8 JSON$"):
        load_spec("spec.json")


def test_brackets_inside_strings_do_not_count_as_nesting(workdir):
    write_spec(workdir, dict(VALID, description='[{"' * 3000))
    assert load_spec("spec.json").description == '[{"' * 3000


def test_in_memory_deep_nesting_is_refused_before_anything_recurses_into_it():
    bad = doc()
    bad["description"] = deep = []
    for _ in range(5000):
        deep.append([])
        deep = deep[0]
    with pytest.raises(SpecError, match=r"^mem\.json: description(\[0\]){32}: nesting deeper than 32 levels; "):
        spec_from_dict(bad, "mem.json", require_model=False)


def test_in_memory_nan_is_rejected_with_its_path():
    bad = doc()
    bad["inputs"][0]["max"] = float("inf")
    with pytest.raises(SpecError, match=r"^mem\.json: inputs\[0\]\.max: inf is not a finite number"):
        spec_from_dict(bad, "mem.json", require_model=False)


def test_bins_too_many_for_the_float64_readings_are_refused_naming_the_count():
    """19 bins over a 1e-9 wide range at 131072: distinct float64 edges, but two of them bin the same readings."""
    document = doc(
        inputs=[{"name": "x", "unit": "", "min": 131072.0, "max": 131072.0 + 1e-9, "bins": 19}], legality_rules=[]
    )
    with pytest.raises(SpecError, match=r"^spec\.json: inputs\[0\]\.bins=19 gives bins that hold no float64 reading"):
        spec_from_dict(document, "spec.json", require_model=False)


@settings(max_examples=examples(300), deadline=None)
@given(low=st.floats(-1e300, 1e300), width=st.floats(5e-324, 1e300), bins=st.integers(1, 300))
@example(low=0.0, width=1e-320, bins=100_000)  # the step underflows to 0: numpy scales k / bins instead
def test_uniform_edges_are_numpys_linspace_bit_for_bit(low, width, bins):
    """The spec loader and the artifact loader materialise bins with `uniform_edges` (standard library only); the
    specs written before it meant numpy's linspace with exact ends, so the two must agree to the bit."""
    high = low + width
    assume(high > low)
    expected = np.linspace(low, high, bins + 1)
    expected[0], expected[-1] = low, high
    assert [e.hex() for e in uniform_edges(low, high, bins)] == [float(e).hex() for e in expected]


def test_bins_over_a_range_wider_than_float64_are_refused_naming_the_overflow():
    """max - min = 2e308 is inf in float64: no edge between the ends can be computed, whatever the count."""
    document = doc(inputs=[{"name": "x", "unit": "", "min": -1e308, "max": 1e308, "bins": 2}], legality_rules=[])
    with pytest.raises(
        SpecError,
        match=r"^spec\.json: inputs\[0\]\.bins=2: max - min over \[-1e\+308, 1e\+308\] "
        r"overflows float64, so the bins' edges cannot be computed; narrow the range",
    ):
        spec_from_dict(document, "spec.json", require_model=False)
