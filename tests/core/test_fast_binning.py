"""The compiled binning is `Machine.cell_of`'s twin: the same cell on every reading it takes, None on the rest."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._artifact import load_artifact
from certfsm.fast_binning import compile_cell_of, compile_cell_of_fixed
from certfsm.machine import OUT_OF_ENVELOPE, Machine


@pytest.fixture(scope="module")
def machine(distilled_example):
    return Machine.from_artifact(load_artifact(distilled_example[2]))


def _values_near_edges(edges):
    """Floats that decide binning: the edges, their float neighbours, beyond the envelope, NaN and infinities."""
    near = [v for e in edges for v in (e, math.nextafter(e, -math.inf), math.nextafter(e, math.inf))]
    return st.one_of(
        st.sampled_from(near + [math.nan, math.inf, -math.inf, -0.0]), st.floats(edges[0] - 10, edges[-1] + 10)
    )


@settings(max_examples=examples(500), deadline=None)
@given(data=st.data())
def test_compiled_binning_is_cell_of_on_every_float_reading(data, machine):
    cell_of = compile_cell_of(machine)
    reading = [data.draw(_values_near_edges(edges)) for edges in machine.edges]
    assert cell_of(reading) == machine.cell_of(reading)
    assert cell_of(tuple(reading)) == machine.cell_of(reading)


@pytest.mark.slow
def test_compiled_binning_is_cell_of_on_random_readings_and_on_every_edge(machine):
    cell_of = compile_cell_of(machine)
    rng = np.random.default_rng(7)
    lower, upper = np.array([e[0] for e in machine.edges]), np.array([e[-1] for e in machine.edges])
    rows = rng.uniform(lower - 0.05 * (upper - lower), upper + 0.05 * (upper - lower), size=(20000, 5)).tolist()
    rows += [[rng.choice(e) for e in machine.edges] for _ in range(5000)]
    rows = [[float(v) for v in row] for row in rows]
    got = [cell_of(row) for row in rows]
    assert got == [machine.cell_of(row) for row in rows]
    assert OUT_OF_ENVELOPE in got and len(set(got)) > 1000


@pytest.mark.parametrize(
    "reading",
    [
        [50.0, 50.0, 50.0, None, 10.0],
        [50.0, 50.0, 50.0, 50, 10.0],
        [50.0, 50.0, True, 50.0, 10.0],
        [50.0, 50.0],
        [50.0] * 6,
        "abcde",
        {"compute_util": 1.0},
        np.array([50.0] * 5),
        iter([50.0] * 5),
        [np.float64(50.0)] * 5,
    ],
)
def test_readings_off_the_fast_path_are_left_to_cell_of(machine, reading):
    """None means: ask `Machine.cell_of`, which converts, falls back or names the input in its error."""
    assert compile_cell_of(machine)(reading) is None


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_compiled_fixed_point_binning_is_cell_of_fixed(data, machine):
    cell_of_fixed = compile_cell_of_fixed(machine)
    values = []
    for interior, low, high in machine.fixed_point:
        marks = (*interior, low, high)
        values.append(
            data.draw(
                st.one_of(
                    st.integers(low - 3, high + 3),
                    st.sampled_from(marks).map(lambda v: v + data.draw(st.integers(-1, 1))),
                )
            )
        )
    assert cell_of_fixed(values) == machine.cell_of_fixed(values)
    assert cell_of_fixed([float(v) for v in values]) is None


def test_a_machine_without_frac_bits_leaves_fixed_point_to_cell_of_fixed(machine):
    from dataclasses import replace

    plain = replace(machine, frac_bits=(None,) * machine.n_inputs)
    assert compile_cell_of_fixed(plain)([0] * machine.n_inputs) is None
