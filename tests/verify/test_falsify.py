"""Falsification: finds planted violations, never returns a safe point, is deterministic given the seed."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import AffineLayer, Network
from certfsm.verify._falsify import Region, falsify, local_search, slack_and_gradient
from certfsm.verify._property import Conjunction, Property, chosen_conjunction


def _net(*layers) -> Network:
    return Network(
        tuple(AffineLayer(np.array(w, float), np.array(b, float), f"layer{k}") for k, (w, b) in enumerate(layers))
    )


def _random_net(rng: np.random.Generator, sizes) -> Network:
    return _net(*[(rng.normal(size=(o, i)), rng.normal(scale=0.3, size=o)) for i, o in zip(sizes, sizes[1:])])


# y = 1 - |x0 - 0.3| - |x1 + 0.2| - |x2 - 0.1| - |x3|: at most 1, only near (0.3, -0.2, 0.1, 0)
PEAK_CENTRE = np.array([0.3, -0.2, 0.1, 0.0])
PEAK = _net(
    (np.concatenate([np.eye(4), -np.eye(4)]), np.concatenate([-PEAK_CENTRE, PEAK_CENTRE])),
    ([-np.ones(8)], [1.0]),
)


def test_a_planted_narrow_violation_is_found():
    prop = Property("peak", -np.ones(4), np.ones(4), (Conjunction([[-1.0]], [-0.97]),))
    x = falsify(PEAK, prop, budget_seconds=5.0, rng=0)
    assert x is not None
    assert prop.contains_input(x)
    assert prop.unsafe_slack(PEAK.evaluate(x)) >= 0.0
    assert np.abs(x - PEAK_CENTRE).sum() <= 0.03 + 1e-12


def test_a_violation_only_on_a_face_of_the_box_is_found():
    # y0 = x0 on [0, 1]^3: y0 >= 1 only on the face x0 = 1.
    network = _net(([[1.0, 0.0, 0.0]], [0.0]))
    prop = Property("face", np.zeros(3), np.ones(3), (Conjunction([[-1.0]], [-1.0]),))
    x = falsify(network, prop, budget_seconds=2.0, rng=1)
    assert x is not None and x[0] == 1.0


def test_a_safe_property_gives_none_within_the_budget():
    prop = Property("peak", -np.ones(4), np.ones(4), (Conjunction([[-1.0]], [-1.01]),))
    assert falsify(PEAK, prop, budget_seconds=0.3, rng=0) is None


def test_an_empty_unsafe_set_gives_none():
    assert falsify(PEAK, Property("none", -np.ones(4), np.ones(4), ()), budget_seconds=1.0) is None


def test_the_same_seed_gives_the_same_point():
    rng = np.random.default_rng(7)
    network = _random_net(rng, (3, 12, 12, 3))
    prop = Property("tokens", -np.ones(3), np.ones(3), (chosen_conjunction(2, 3, "argmax", margin=0.5),))
    first = falsify(network, prop, budget_seconds=5.0, rng=11)
    second = falsify(network, prop, budget_seconds=5.0, rng=np.random.default_rng(11))
    assert first is not None
    np.testing.assert_array_equal(first, second)


def test_the_ascent_direction_is_the_gradient_of_the_active_row():
    rng = np.random.default_rng(5)
    network = _random_net(rng, (3, 10, 10, 2))
    prop = Property("p", -np.ones(3), np.ones(3), (Conjunction([[1.0, -1.0]], [-50.0]),))
    x = rng.uniform(-1, 1, size=(5, 3))
    slack, gradient = slack_and_gradient(network, prop, x)
    step = 1e-7
    for i in range(3):
        shifted = x.copy()
        shifted[:, i] += step
        numeric = (prop.unsafe_slack(network.evaluate(shifted)) - slack) / step
        np.testing.assert_allclose(gradient[:, i], numeric, rtol=1e-4, atol=1e-6)


def test_local_search_stays_in_the_box_and_never_gets_worse():
    rng = np.random.default_rng(2)
    network = _random_net(rng, (2, 16, 16, 1))
    prop = Property("p", np.array([-0.5, 0.0]), np.array([0.5, 0.25]), (Conjunction([[-1.0]], [-100.0]),))
    starts = rng.uniform(prop.lower, prop.upper, size=(8, 2))
    found, slack = local_search(network, prop, starts, steps=30)
    assert np.all(found >= prop.lower) and np.all(found <= prop.upper)
    assert np.all(slack >= prop.unsafe_slack(network.evaluate(starts)))
    np.testing.assert_array_equal(slack, prop.unsafe_slack(network.evaluate(found)))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.floats(-2.0, 2.0))
def test_a_returned_point_is_always_in_the_box_and_unsafe_in_float64(seed, threshold):
    rng = np.random.default_rng(seed)
    n_in = int(rng.integers(1, 4))
    network = _random_net(rng, (n_in, 6, 6, 2))
    lower = rng.uniform(-1, 0, size=n_in)
    upper = lower + rng.uniform(0, 1, size=n_in)
    unsafe = (Conjunction([[-1.0, 0.0], [1.0, -1.0]], [-threshold, 0.0]), Conjunction([[0.0, 1.0]], [-threshold]))
    prop = Property("random", lower, upper, unsafe)
    x = falsify(network, prop, budget_seconds=0.05, rng=seed)
    if x is not None:
        assert prop.contains_input(x)
        assert prop.unsafe_slack(network.evaluate(x)) >= 0.0


def test_a_region_attack_finds_a_violation_inside_its_boxes_and_samples_only_there():
    prop = Property("peak", -np.ones(4), np.ones(4), (Conjunction([[-1.0]], [-0.99]),))
    region = Region(
        np.array([PEAK_CENTRE - 0.05, -np.ones(4)]),
        np.array([PEAK_CENTRE + 0.05, -0.5 * np.ones(4)]),
        np.array([3.0, 1.0]),
    )
    points = region.sample(np.random.default_rng(0), 2000)
    inside = [np.all((points >= region.lower[k]) & (points <= region.upper[k]), axis=1) for k in range(2)]
    assert np.all(inside[0] | inside[1])
    assert 0.6 < inside[0].mean() < 0.9
    x = falsify(PEAK, prop, budget_seconds=2.0, rng=0, region=region)
    assert x is not None and prop.contains_input(x)
    assert prop.unsafe_slack(PEAK.evaluate(x)) >= 0.0
