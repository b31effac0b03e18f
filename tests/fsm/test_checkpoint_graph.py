"""A distill checkpoint is bound to what each layer reads, and a chain's binding is what it always was."""

from __future__ import annotations

import hashlib

import numpy as np

from certfsm import AffineLayer
from certfsm.fsm._cell_problem import _problem
from certfsm.fsm._checkpoint import _fingerprints
from test_distill import grid_spec, slanted_network


def _model_hash(network) -> str:
    spec = grid_spec(4)
    return _fingerprints(spec, _problem(spec, network))["model_sha256"]


def test_a_chain_keeps_the_model_hash_of_its_weights_alone():
    network = slanted_network()
    expected = hashlib.sha256()
    for layer in network.layers:
        expected.update(repr(layer.weight.shape).encode())
        expected.update(np.ascontiguousarray(layer.weight).tobytes())
        expected.update(np.ascontiguousarray(layer.bias).tobytes())
    assert _model_hash(network) == expected.hexdigest()
    spelled_out = network.replace(
        layers=tuple(AffineLayer(x.weight, x.bias, x.source, reads=(k,)) for k, x in enumerate(network.layers))
    )
    assert _model_hash(spelled_out) == expected.hexdigest()


def test_the_same_weights_reading_other_activations_are_another_model():
    # the output layer reads the input (two values, like the hidden layer) instead of the hidden layer
    network = slanted_network()
    hidden, out = network.layers
    skipping = network.replace(layers=(hidden, AffineLayer(out.weight, out.bias, out.source, reads=(0,))))
    assert _model_hash(skipping) != _model_hash(network)
