"""Branch and bound, `check` and falsification on graph networks whose maximum is known exactly.

A random graph gets a tent: a hidden layer that reads the input and
computes ``|x - peak|`` (a skip from the input), which the output layer
subtracts from ``y0`` steeper than the graph can rise (`_lipschitz`), so
the objective ``y0 - y1`` is largest at `peak` and nowhere else; its value
there is one float64 evaluation. A threshold 1e-6 above it must be proved,
one 1e-6 below it must never be, and falsification must find the small
neighbourhood of the peak.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from certfsm import PROVED, VIOLATED, AffineLayer, Network
from certfsm.verify import check, falsify, prove_boxes
from certfsm.verify._property import Conjunction, Property
from graph_networks import random_graph

OBJECTIVE = np.array([1.0, -1.0])


def _lipschitz(network: Network) -> np.ndarray:
    """Per input, a bound on |d (OBJECTIVE . y) / d x_i| over all inputs: |W| pushed through the graph."""
    slopes = [np.eye(network.n_inputs)]
    for index, layer in enumerate(network.layers):
        slopes.append(np.abs(layer.weight) @ np.concatenate([slopes[r] for r in network.reads[index]]))
    return np.abs(OBJECTIVE) @ slopes[-1]


def _tented(graph: Network, peak: np.ndarray, steep: float) -> Network:
    """`graph` with ``steep * |x - peak|_1`` taken from output 0 by a hidden layer that reads the input."""
    *hidden, out = graph.layers
    n = graph.n_inputs
    tent = AffineLayer(np.concatenate([np.eye(n), -np.eye(n)]), np.concatenate([-peak, peak]), "tent", reads=(0,))
    penalty = np.zeros((out.n_out, 2 * n))
    penalty[0] = -steep
    reads = graph.reads[-1] + (len(graph.layers),)
    out = AffineLayer(np.concatenate([out.weight, penalty], axis=1), out.bias, out.source, reads=reads)
    return Network((*hidden, tent, out))


def _case(seed: int, n_inputs: int) -> tuple[Network, np.ndarray, np.ndarray, float, np.ndarray]:
    """A tented graph, the box [-1, 1]^n, the objective's maximum over it and where it is."""
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, n_inputs, [6, 5], 2, skip=0.7, grid=0.125)
    peak = rng.integers(-6, 7, n_inputs) / 8.0
    network = _tented(graph, peak, float(np.ceil(_lipschitz(graph).max())) + 1.0)
    return network, -np.ones(n_inputs), np.ones(n_inputs), float(network.evaluate(peak) @ OBJECTIVE), peak


def _above(network, lower, upper, threshold) -> Property:
    """Unsafe: y0 - y1 >= threshold."""
    return Property("above", lower, upper, (Conjunction([-OBJECTIVE], [-threshold]),))


def _quarters(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cuts = [np.linspace(lo, hi, 5) for lo, hi in zip(lower, upper)]
    corners = list(itertools.product(range(4), repeat=len(lower)))
    low = np.array([[cuts[i][k] for i, k in enumerate(corner)] for corner in corners])
    high = np.array([[cuts[i][k + 1] for i, k in enumerate(corner)] for corner in corners])
    return low, high


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_inputs", [1, 2])
def test_prove_boxes_on_a_graph_proves_above_the_maximum_and_never_below_it(seed, n_inputs):
    network, lower, upper, top, peak = _case(seed, n_inputs)
    low, high = _quarters(lower, upper)
    assert prove_boxes(network, _above(network, lower, upper, top + 1e-6), low, high).proved.all()
    below = prove_boxes(network, _above(network, lower, upper, top - 1e-6), low, high).proved
    holding = np.all((low <= peak) & (peak <= high), axis=1)
    assert holding.any() and not below[holding].any()


@pytest.mark.parametrize("seed", range(3))
def test_check_on_a_graph_proves_above_the_maximum_and_finds_a_counterexample_below(seed):
    network, lower, upper, top, peak = _case(seed, 2)
    result = check(network, _above(network, lower, upper, top + 1e-6), engine="bounds", timeout=60, jobs=1)
    assert result.verdict == PROVED, result.reason
    result = check(network, _above(network, lower, upper, top - 1e-6), engine="bounds", timeout=60, jobs=1)
    assert result.verdict == VIOLATED, result.reason


@pytest.mark.parametrize("seed", range(4))
def test_falsification_finds_the_small_unsafe_neighbourhood_of_a_graphs_peak(seed):
    network, lower, upper, top, _ = _case(seed, 2)
    found = falsify(network, _above(network, lower, upper, top - 1e-4), budget_seconds=5.0, rng=seed)
    assert found is not None
    assert network.evaluate(found) @ OBJECTIVE >= top - 1e-4
