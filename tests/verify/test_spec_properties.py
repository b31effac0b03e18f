"""Spec -> properties: the right boxes, the right bad indices, gated copies, and the meaning of each."""

import numpy as np
import pytest

from certfsm import spec_from_dict
from certfsm.verify._spec_properties import spec_properties


def _spec(**changes):
    data = {
        "certfsm_spec": 1,
        "name": "tiny",
        "model": "tiny.onnx",
        "inputs": [
            {"name": "load", "unit": "%", "min": 0, "max": 100, "bins": 4},
            {"name": "temp", "unit": "degC", "min": 20, "max": 110, "edges": [20, 85, 110]},
        ],
        "outputs": ["KEEP", "INT4", "RETIRED"],
        "tokens": {"KEEP": 0, "INT4": 1, "RETIRED": 2},
        "legal_tokens": ["KEEP", "INT4"],
        "decision": "argmax",
        "conservative_token": "KEEP",
        "confidence_gate": {"margin": 0.25},
        "legality_rules": [{"name": "no-int4-hot", "when": {"temp": {"min": 85}}, "forbid": ["INT4"]}],
    }
    data.update(changes)
    data = {key: value for key, value in data.items() if value is not None}
    return spec_from_dict(data, "spec.json", require_model=False)


def test_properties_are_token_range_and_each_rule_plain_then_gated():
    names = [p.name for p in spec_properties(_spec())]
    assert names == ["token_range", "legality:no-int4-hot", "token_range/gated", "legality:no-int4-hot/gated"]


def test_without_a_gate_there_are_no_gated_copies():
    spec = _spec(confidence_gate=None)
    assert [p.name for p in spec_properties(spec)] == ["token_range", "legality:no-int4-hot"]


def test_rule_box_is_the_rule_clipped_to_the_envelope():
    rule = spec_properties(_spec())[1]
    assert rule.lower.tolist() == [0.0, 85.0]
    assert rule.upper.tolist() == [100.0, 110.0]


@pytest.mark.parametrize(
    "scores, unsafe",
    [
        ([0.0, 1.0, 2.0], True),  # the retired head wins
        ([2.0, 1.0, 2.0], True),  # a tie with the retired head counts as "can be chosen"
        ([2.0, 1.0, 1.9], False),
    ],
)
def test_token_range_unsafe_set_means_an_illegal_index_is_chosen(scores, unsafe):
    token_range = spec_properties(_spec())[0]
    assert (token_range.unsafe_slack(np.array(scores)) >= 0) == unsafe


@pytest.mark.parametrize(
    "scores, unsafe",
    [
        ([0.0, 1.0, -1.0], True),
        ([1.0, 1.2, -1.0], False),  # INT4 wins, but by less than the 0.25 margin: the gate emits KEEP
        ([1.0, 1.25, -1.0], True),  # exactly the margin counts (non-strict)
    ],
)
def test_gated_rule_unsafe_set_needs_the_margin(scores, unsafe):
    gated_rule = spec_properties(_spec())[3]
    assert (gated_rule.unsafe_slack(np.array(scores)) >= 0) == unsafe


def test_all_legal_outputs_give_an_empty_unsafe_set():
    spec = _spec(outputs=["KEEP", "INT4"], tokens={"KEEP": 0, "INT4": 1})
    assert spec_properties(spec)[0].unsafe == ()
