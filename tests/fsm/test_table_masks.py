"""The distillation's vectorised allowed masks (`allowed_masks`) against the core's rule the artifact loader uses.

`certfsm.machine.cell_allowed_masks` is the one standard-library statement
of docs/semantics.md, "Legality rules"; the table's masks are its
vectorised twin, held equal to it on the example and on random grids and
rule boxes whose bounds fall exactly on cell edges.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import spec_from_dict
from certfsm.fsm._table import allowed_masks
from certfsm.machine import cell_allowed_masks


def masks_of(spec_document):
    """The allowed masks of a spec document by the distillation's own code, one bitmask per cell."""
    spec = spec_from_dict(spec_document, "/certfsm-test/spec.json", require_model=False)
    rows = allowed_masks(spec)
    return (rows.astype(np.int64) << np.arange(rows.shape[1])).sum(axis=1).tolist()


def test_the_artifacts_masks_are_the_distillations_on_the_example(distilled_example):
    spec, _, path = distilled_example
    assert masks_of(spec.to_json()) == json.loads(path.read_bytes())["payload"]["table"]["allowed"]


EDGE_VALUES = [0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 5.0]


@st.composite
def grids_and_rules(draw):
    """1 to 3 inputs with edges from a small set, and rule boxes whose bounds often fall exactly on edges."""
    inputs = []
    for i in range(draw(st.integers(1, 3))):
        edges = sorted(draw(st.sets(st.sampled_from(EDGE_VALUES), min_size=2, max_size=5)))
        inputs.append({"name": f"x{i}", "unit": "", "min": edges[0], "max": edges[-1], "edges": edges})
    rules = []
    for j in range(draw(st.integers(0, 3))):
        when = {}
        for item in inputs:
            if draw(st.booleans()):
                values = [v for v in EDGE_VALUES + [0.25, 1.75, 4.5] if item["min"] <= v <= item["max"]]
                low, high = sorted(draw(st.lists(st.sampled_from(values), min_size=2, max_size=2)))
                side = {}
                if draw(st.booleans()):
                    side["min"] = low
                if draw(st.booleans()):
                    side["max"] = high
                if side:
                    when[item["name"]] = side
        rules.append(
            {
                "name": f"r{j}",
                "when": when,
                "forbid": draw(st.lists(st.sampled_from(["B", "C"]), min_size=1, max_size=2, unique=True)),
            }
        )
    legal = ["A", "B", "C"] if draw(st.booleans()) else ["A", "B"]
    return {
        "certfsm_spec": 1,
        "name": "random",
        "model": "m.onnx",
        "inputs": inputs,
        "outputs": ["A", "B", "C"],
        "tokens": {"A": 0, "B": 1, "C": 2},
        "legal_tokens": legal,
        "decision": "argmax",
        "conservative_token": "A",
        "legality_rules": rules,
    }


@settings(max_examples=examples(150), deadline=None)
@given(document=grids_and_rules())
def test_the_core_masks_equal_the_vectorised_masks_on_random_grids_and_rules(document):
    spec = spec_from_dict(document, "/certfsm-test/spec.json", require_model=False)
    legal = sum(1 << spec.output_index(t) for t in spec.legal_tokens)
    rules = [(r.lower, r.upper, sum(1 << k for k in spec.forbidden_indices(r))) for r in spec.rules]
    core = cell_allowed_masks([item.edges for item in spec.inputs], legal, rules)
    assert list(core) == masks_of(document)
