"""Tiny one-input queries shared by the engine tests: y >= v, y <= v over [lower, upper]."""

import numpy as np

from certfsm import Network
from certfsm.verify._property import Conjunction, Property


def at_least(value: float) -> Conjunction:
    return Conjunction([[-1.0]], [-value], (f"y >= {value}",))


def at_most(value: float) -> Conjunction:
    return Conjunction([[1.0]], [value], (f"y <= {value}",))


def box(*unsafe: Conjunction, lower=-1.0, upper=1.0) -> Property:
    return Property("case", [lower], [upper], unsafe)


def assert_real_counterexample(network: Network, prop: Property, result) -> None:
    """A violated result whose point lies in the box and re-evaluates (float64) into the unsafe set."""
    assert result.verdict == "violated", result.reason
    assert prop.contains_input(result.counterexample)
    assert prop.unsafe_slack(network.evaluate(result.counterexample)) >= 0.0
    np.testing.assert_array_equal(result.outputs, network.evaluate(result.counterexample))
