"""The decision rule and confidence gate: ties, direction, the probability-to-margin conversion."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from certfsm._decision import decide, decision_margin, gated_decide, margin_from_probability


def test_ties_go_to_the_lowest_index_for_both_rules():
    scores = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 5.0]])
    assert decide(scores, "argmax").tolist() == [1, 2]
    assert decide(scores, "argmin").tolist() == [0, 0]


def test_argmin_picks_the_smallest_score_like_acas_xu():
    assert int(decide(np.array([0.3, -1.0, 0.2, 5.0, -0.5]), "argmin")) == 1


def test_gate_emits_the_conservative_index_when_the_margin_is_not_met():
    scores = np.array([[0.0, 1.0, 0.7], [0.0, 1.0, 0.2]])
    assert gated_decide(scores, "argmax", margin=0.5, conservative_index=0).tolist() == [0, 1]


def test_gate_margin_is_non_strict():
    scores = np.array([0.0, 1.5, 1.0])
    assert int(gated_decide(scores, "argmax", margin=0.5, conservative_index=0)) == 1


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_probability_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ValueError, match=r"^probability=.* must lie strictly between 0 and 1$"):
        margin_from_probability(bad, 4)


def test_unknown_decision_rule_is_refused():
    with pytest.raises(ValueError, match=r"^decision rule 'softmax' is not one of"):
        decide(np.zeros(3), "softmax")


@given(p=st.floats(0.51, 0.999), k=st.integers(2, 8), others=st.lists(st.floats(-5, 5), min_size=7, max_size=7))
def test_margin_guarantees_the_softmax_probability(p, k, others):
    """If the top logit beats all K-1 others by m, its softmax probability is at least p."""
    m = margin_from_probability(p, k)
    logits = np.array(others[: k - 1])
    top = logits.max() + m if len(logits) else 0.0
    exps = np.exp(np.concatenate([[top], logits]) - top)
    assert exps[0] / exps.sum() >= p - 1e-12
    assert decision_margin(np.concatenate([[top], logits]), "argmax") >= m - 1e-9
