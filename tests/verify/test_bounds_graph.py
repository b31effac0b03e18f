"""The numeric bound engines on graph networks (layers that read several earlier activations).

Sound against dense sampling on random graphs, with exact gradients for the
slope optimiser, and a graph that computes a chain's function through
zero-weight skips is bounded as that chain is.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import AffineLayer, Network
from certfsm.verify import _bounds, _slopes
from certfsm.verify._falsify import slack_and_gradient
from certfsm.verify._property import Conjunction, Property
from graph_networks import random_graph
from test_bounds import _samples


@st.composite
def graphs_and_boxes(draw):
    """A random graph network (weights on a grid or not), a batch of boxes and objective rows."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_inputs = draw(st.integers(1, 3))
    hidden = [draw(st.integers(1, 6)) for _ in range(draw(st.integers(1, 4)))]
    network = random_graph(
        rng,
        n_inputs,
        hidden,
        draw(st.integers(1, 3)),
        skip=draw(st.sampled_from([0.3, 0.7, 1.0])),
        grid=draw(st.sampled_from([None, 0.125])),
    )
    boxes = draw(st.integers(1, 3))
    centre = rng.uniform(-2, 2, size=(boxes, n_inputs))
    radius = rng.uniform(0, 1.5, size=(boxes, n_inputs)) * (rng.uniform(size=(boxes, n_inputs)) > 0.15)
    C = rng.normal(size=(draw(st.integers(1, 3)), network.n_outputs))
    d = rng.normal(size=C.shape[0])
    return network, centre - radius, centre + radius, C, d, rng


def _preactivations(network: Network, x: np.ndarray) -> list[np.ndarray]:
    """Every layer's pre-activation at the rows of x, walking the graph in float64."""
    activations, values = [x], []
    for index, layer in enumerate(network.layers):
        values.append(network.gather(index, activations) @ layer.weight.T + layer.bias)
        activations.append(np.maximum(values[-1], 0.0))
    return values


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_boxes())
def test_preactivation_bounds_of_a_graph_contain_every_sampled_preactivation(case):
    network, lowers, uppers, _, _, rng = case
    forward = _bounds.preactivation_bounds(network, lowers, uppers, method="forward")
    backward = _bounds.preactivation_bounds(network, lowers, uppers)
    chosen = _bounds.preactivation_bounds(
        network, lowers, uppers, known=_bounds.pack(backward, len(lowers)), slope_choices=True
    )
    magnitude = _bounds.output_magnitude(network, backward, lowers, uppers)
    for box in range(lowers.shape[0]):
        values = _preactivations(network, _samples(lowers[box], uppers[box], rng))
        for index, bounds in enumerate(zip(forward, backward, chosen)):
            for layer in bounds:
                assert np.all(layer.low[box] <= values[index].min(axis=0)), index
                assert np.all(values[index].max(axis=0) <= layer.high[box]), index
        # The magnitude is the float64 sum of the output's absolute terms, for the rounding allowance; a sample at
        # a corner where every term has one sign evaluates to that same sum, give or take its last bits (CI
        # found 1.41944601... above it in the last place), so the comparison allows a few ulps.
        assert np.all(np.abs(values[-1]) <= magnitude[box] * (1 + 1e-12))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_boxes())
def test_objective_lower_bounds_of_a_graph_never_exceed_a_sampled_value(case):
    network, lowers, uppers, C, d, rng = case
    for method in ("forward", "backward"):
        result = _bounds.objective_bounds(network, lowers, uppers, C, d, method=method)
        for box in range(lowers.shape[0]):
            values = network.evaluate(_samples(lowers[box], uppers[box], rng)) @ C.T - d
            assert np.all(result.lower[box] <= values.min(axis=0)), (method, box)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_boxes())
def test_optimised_bounds_of_a_graph_never_exceed_a_sampled_value_of_their_combination(case):
    network, lowers, uppers, C, d, rng = case
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    start = rng.integers(0, C.shape[0], size=lowers.shape[0])
    for steps in (1, 4, 12):
        lower, weights, _ = _slopes.optimised_disjunct_bounds(network, hidden, lowers, uppers, C, d, start, steps)
        for box in range(lowers.shape[0]):
            values = (network.evaluate(_samples(lowers[box], uppers[box], rng)) @ C.T - d) @ weights[box]
            assert lower[box] <= values.min(), (steps, box)


@pytest.mark.parametrize("seed", range(8))
def test_slope_gradients_on_a_graph_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    network = random_graph(rng, 3, [5, 4, 6], 2, skip=0.6, grid=0.125 if seed % 2 else None)
    lowers, uppers = np.full((1, 3), -1.5), np.full((1, 3), 1.5)
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    rows = rng.normal(size=(4, network.layers[-1].n_in))
    constants = rng.normal(size=4)
    owner = np.zeros(4, dtype=np.int64)
    alphas = [rng.uniform(0.05, 0.95, size=(4, h.low.shape[1])) for h in hidden]
    centre, radius = (lowers + uppers) / 2.0, (uppers - lowers) / 2.0

    def bound(alphas, rows):
        return _slopes._bound_and_gradients(network, hidden, rows, constants, owner, alphas, centre, radius)[0]

    _, gradients, row_gradient = _slopes._bound_and_gradients(
        network, hidden, rows, constants, owner, alphas, centre, radius
    )
    step = 1e-6
    for index, alpha in enumerate(alphas):
        for neuron in range(alpha.shape[1]):
            up = [a.copy() for a in alphas]
            down = [a.copy() for a in alphas]
            up[index][:, neuron] += step
            down[index][:, neuron] -= step
            numeric = (bound(up, rows) - bound(down, rows)) / (2 * step)
            np.testing.assert_allclose(gradients[index][:, neuron], numeric, rtol=1e-5, atol=1e-6)
    for column in range(rows.shape[1]):
        up, down = rows.copy(), rows.copy()
        up[:, column] += step
        down[:, column] -= step
        numeric = (bound(alphas, up) - bound(alphas, down)) / (2 * step)
        np.testing.assert_allclose(row_gradient[:, column], numeric, rtol=1e-5, atol=1e-6)


def _chain(rng: np.random.Generator, sizes: list[int]) -> Network:
    layers = [
        AffineLayer(
            rng.normal(size=(n_out, n_in)).astype(np.float32),
            rng.normal(scale=0.5, size=n_out).astype(np.float32),
            f"l{k}",
        )
        for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))
    ]
    return Network(tuple(layers))


def _with_zero_skips(chain: Network, reads) -> Network:
    """The chain's function as a graph: layer k also reads the activations `reads(k)` with zero weights."""
    sizes = chain.activation_sizes
    layers = []
    for index, layer in enumerate(chain.layers):
        chosen = tuple(sorted(set(reads(index)) | {index}))
        blocks = [layer.weight if r == index else np.zeros((layer.n_out, sizes[r])) for r in chosen]
        layers.append(AffineLayer(np.concatenate(blocks, axis=1), layer.bias, layer.source, reads=chosen))
    return Network(tuple(layers))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reads", [lambda k: (0,), lambda k: tuple(range(k))], ids=["input", "every-earlier"])
def test_a_graph_equal_to_a_chain_is_bounded_as_the_chain(seed, reads):
    rng = np.random.default_rng(seed)
    chain = _chain(rng, [3, 7, 6, 5, 2])
    graph = _with_zero_skips(chain, reads)
    assert chain.is_chain and not graph.is_chain
    centre = rng.uniform(-1, 1, size=(4, 3))
    lowers, uppers = centre - 0.6, centre + 0.6
    C, d = rng.normal(size=(3, 2)), rng.normal(size=3)
    for method in ("forward", "backward"):
        for options in ({}, {"slope_choices": True}):
            expected = _bounds.preactivation_bounds(chain, lowers, uppers, method, **options)
            found = _bounds.preactivation_bounds(graph, lowers, uppers, method, **options)
            for one, other in zip(expected, found):
                for name in ("low", "high", "magnitude"):
                    np.testing.assert_allclose(getattr(other, name), getattr(one, name), rtol=0, atol=1e-9)
        expected = _bounds.objective_bounds(chain, lowers, uppers, C, d, method=method)
        found = _bounds.objective_bounds(graph, lowers, uppers, C, d, method=method)
        np.testing.assert_allclose(found.lower, expected.lower, rtol=0, atol=1e-9)
        np.testing.assert_allclose(found.coefficients, expected.coefficients, rtol=0, atol=1e-9)
    hidden = _bounds.preactivation_bounds(chain, lowers, uppers)
    start = np.zeros(4, dtype=np.int64)
    expected = _slopes.optimised_disjunct_bounds(chain, hidden, lowers, uppers, C, d, start, 8)
    found = _slopes.optimised_disjunct_bounds(graph, hidden, lowers, uppers, C, d, start, 8)
    for one, other in zip(expected, found):
        np.testing.assert_allclose(other, one, rtol=0, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_the_ascent_direction_on_a_graph_is_the_slack_gradient(seed):
    rng = np.random.default_rng(seed)
    network = random_graph(rng, 3, [6, 5, 4], 2, skip=0.7)
    prop = Property("p", [-2.0] * 3, [2.0] * 3, (Conjunction([[1.0, -2.0]], [0.5]),))
    x = rng.uniform(-2, 2, size=(50, 3))
    _, gradient = slack_and_gradient(network, prop, x)
    step = 1e-7
    for column in range(3):
        shift = np.zeros(3)
        shift[column] = step
        numeric = (prop.unsafe_slack(network.evaluate(x + shift)) - prop.unsafe_slack(network.evaluate(x - shift))) / (
            2 * step
        )
        np.testing.assert_allclose(gradient[:, column], numeric, rtol=1e-5, atol=1e-6)
