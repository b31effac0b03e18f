"""The certified machine in the core: decoded once from an artifact, binned and stepped with the standard library.

The oracles: the table and parameters that distillation proved (decoding
must give them back cell by cell and mask by mask), the vectorised grid
of `certfsm.fsm` (binning must agree on every point, edges included) and
the exact meaning of fixed point (v means v * 2^-frac_bits).
"""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._artifact import load_artifact
from certfsm.machine import OUT_OF_ENVELOPE, Machine, Reason


@pytest.fixture(scope="module")
def distilled(distilled_example):
    spec, run, path = distilled_example
    return spec, run, load_artifact(path)


@pytest.fixture(scope="module")
def machine(distilled):
    return Machine.from_artifact(distilled[2])


def test_the_decoded_machine_is_the_table_and_parameters_the_proofs_covered(distilled, machine):
    from certfsm.fsm import EXACT
    from certfsm.machine import MachineParams

    spec, run, artifact = distilled
    table = run.distillation.table
    assert machine.n_cells == table.n_cells and machine.shape == table.grid.shape
    assert machine.proposal == tuple(table.proposal.tolist())
    assert machine.exact == tuple((table.status == EXACT).tolist())
    for cell in range(table.n_cells):
        assert machine.allowed_row(cell) == tuple(table.allowed[cell].tolist()), cell
    assert machine.params == MachineParams.from_spec(spec)
    assert machine.edges == tuple(tuple(e.tolist()) for e in table.grid.edges)
    assert machine.names == table.grid.names and machine.frac_bits == table.grid.frac_bits
    assert machine.tokens == spec.outputs and machine.artifact_sha256 == artifact.sha256


def test_scalar_binning_agrees_with_the_vectorised_grid_everywhere_edges_included(distilled, machine):
    grid = distilled[1].distillation.table.grid
    rng = np.random.default_rng(3)
    lower, upper = np.array([e[0] for e in machine.edges]), np.array([e[-1] for e in machine.edges])
    points = rng.uniform(lower - 0.1 * (upper - lower), upper + 0.1 * (upper - lower), size=(3000, len(lower)))
    on_edges = np.array([[rng.choice(e) for e in machine.edges] for _ in range(2000)])
    for batch in (points, on_edges):
        assert [machine.cell_of(row) for row in batch] == grid.cell_of(batch).tolist()


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_the_fixed_point_path_decides_exactly_as_the_real_path_on_every_representable_value(data, machine):
    """v and the real v * 2^-frac_bits fall in the same cell (docs/semantics.md, "Fixed point")."""
    values = []
    for (low, high), bits, edges in zip(((t[1], t[2]) for t in machine.fixed_point), machine.frac_bits, machine.edges):
        around = st.sampled_from(machine.fixed_point[len(values)][0] + (low, high))
        values.append(
            data.draw(
                st.one_of(st.integers(low - 3, high + 3), around.map(lambda v: v + data.draw(st.integers(-1, 1))))
            )
        )
    real = [math.ldexp(v, -bits) for v, bits in zip(values, machine.frac_bits)]
    assert all(Fraction(r) == Fraction(v, 1 << b) for r, v, b in zip(real, values, machine.frac_bits))
    assert machine.cell_of_fixed(values) == machine.cell_of(real)


def test_step_through_the_machine_is_the_step_function_on_the_cells_row(machine):
    from certfsm.machine import step

    rng = np.random.default_rng(5)
    state = machine.initial_state()
    for _ in range(2000):
        cell = int(rng.integers(-1, machine.n_cells))
        sla_ok, override = bool(rng.random() > 0.1), (None if rng.random() > 0.2 else int(rng.integers(0, 5)))
        expected = (
            step(machine.params, state, None, None, False, sla_ok, override)
            if cell < 0
            else step(machine.params, state, machine.proposal[cell], machine.allowed_row(cell), True, sla_ok, override)
        )
        got = machine.step(state, cell, sla_ok, override)
        assert got == expected
        state = got[0]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None, -1e9, 1e9])
def test_values_that_are_not_readings_fall_back_rather_than_raise(machine, value):
    reading = [50.0, 50.0, 50.0, 50.0, 10.0]
    reading[3] = value
    assert machine.cell_of(reading) == OUT_OF_ENVELOPE
    _, token, reason = machine.step(machine.initial_state(), machine.cell_of(reading))
    assert token == machine.params.conservative and reason == Reason.FALLBACK_ENVELOPE


@pytest.mark.parametrize(
    "reading, error, message",
    [
        ([1.0, 2.0], ValueError, r"^reading has 2 values but the machine has 5 inputs \(compute_util, "),
        ("abcde", TypeError, r"^reading: input compute_util = 'a' is not a number$"),
        (42, TypeError, r"^reading 42 is not a sequence; give one value per input \(compute_util, "),
        ([1.0, 2.0, True, 4.0, 5.0], TypeError, r"^reading: input l2_miss_rate = True is not a number$"),
    ],
)
def test_a_malformed_reading_is_a_clear_error_naming_the_input(machine, reading, error, message):
    with pytest.raises(error, match=message):
        machine.cell_of(reading)


def test_the_fixed_point_path_refuses_floats_naming_the_input(machine):
    with pytest.raises(TypeError, match=r"^fixed-point reading: input compute_util = 1.5 is not an integer; "):
        machine.cell_of_fixed([1.5, 0, 0, 0, 0])


def test_the_core_machine_imports_with_the_standard_library_alone():
    """An embedded target runs the scalar path without numpy: importing certfsm.machine must not load it."""
    code = (
        "import sys; sys.modules['numpy'] = None; import certfsm.machine as m; "
        "print(m.Machine.__name__, 'numpy' in sys.modules and sys.modules['numpy'] is not None)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Machine", "False"]
