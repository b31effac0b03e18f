"""The step table is `Machine.step`'s twin: equal on every reachable state crossed with every input class.

Two machines: the distilled example (5 tokens, confirm 3, cooldown 8,
two overridable tokens) and a small synthetic one whose cells differ in
proposal and allowed mask only in places, with nonzero confirm and
cooldown, where every cell and many override values are tried, not only
class representatives.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import load_artifact
from certfsm.machine import OUT_OF_ENVELOPE, Machine, MachineParams, State
from certfsm.runtime._step_table import StepTable


@pytest.fixture(scope="module")
def example(distilled_example):
    return Machine.from_artifact(load_artifact(distilled_example[2]))


def synthetic() -> Machine:
    """3 x 2 cells, 4 tokens (0 conservative, 1 and 3 overridable), confirm 2, cooldown 3; token 2 forbidden in two
    cells, token 3 in one, and cells 0 and 5 with the same proposal but different masks."""
    params = MachineParams(
        n_tokens=4,
        conservative=0,
        confirm_cycles=2,
        cooldown_cycles=3,
        overridable=frozenset({1, 3}),
        codes=(0, 5, 9, 15),
    )
    return Machine(
        names=("a", "b"),
        edges=((0.0, 1.0, 2.0, 3.0), (0.0, 1.0, 2.0)),
        frac_bits=(None, None),
        tokens=("SAFE", "FAST", "TURBO", "AWAY"),
        proposal=(2, 1, 2, 0, 3, 2),
        exact=(True, False, True, True, False, True),
        allowed=(0b1111, 0b1011, 0b0111, 0b0011, 0b1011, 0b1011),
        params=params,
    )


def _check_every_class(machine: Machine, every_cell: bool) -> int:
    table = StepTable(machine)
    states = table.reachable_states()
    reference = StepTable(machine)  # a fresh table, so each comparison below fills its own slot from this call
    cells = [*range(machine.n_cells), OUT_OF_ENVELOPE] if every_cell else None
    overrides = [None, -1, *range(machine.params.n_tokens + 2)] if every_cell else None
    for state in states:
        if not every_cell:  # a leaf of each class (on a flat table, the cells of one class are one leaf)
            for leaf, sla_ok, override in table.input_classes():
                expected = machine.step_leaf(state, leaf, sla_ok, override)
                assert reference.step_leaf(state, leaf, sla_ok, override) == expected, (state, leaf, sla_ok, override)
                assert table.step_leaf(state, leaf, sla_ok, override) == expected
            continue
        for cell, sla_ok, override in [(c, ok, o) for c in cells for ok in (True, False) for o in overrides]:
            assert reference.step(state, cell, sla_ok, override) == machine.step(state, cell, sla_ok, override), (
                state,
                cell,
                sla_ok,
                override,
            )
            assert table.step(state, cell, sla_ok, override) == machine.step(state, cell, sla_ok, override)
    return len(states)


@pytest.mark.slow
def test_the_table_equals_step_on_every_reachable_state_and_input_class_of_the_example(example):
    assert _check_every_class(example, every_cell=False) > 100


def test_cells_of_one_class_are_the_same_to_step(example):
    """What makes a representative stand for its class: the same proposal and allowed mask (all `step` reads)."""
    table = StepTable(example)
    first = {}
    for cell in range(example.n_cells):
        first.setdefault(table.cell_class[cell], (example.proposal[cell], example.allowed[cell]))
        assert first[table.cell_class[cell]] == (example.proposal[cell], example.allowed[cell])
    assert table.cell_class[OUT_OF_ENVELOPE] == table.n_classes - 1 == len(first)


def test_the_table_equals_step_on_every_reachable_state_every_cell_and_override_of_a_synthetic_machine():
    reached = _check_every_class(synthetic(), every_cell=True)
    # every register moves: tokens, candidates with counts 1..confirm, cooldowns 0..cooldown_cycles
    assert reached > 4 * 3


inputs = st.tuples(st.integers(-1, 5), st.booleans(), st.one_of(st.none(), st.integers(-2, 5)))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(inputs, max_size=60), st.integers(0, 3), st.integers(0, 3))
def test_random_runs_decide_alike_through_the_table_and_step(steps, current, cooldown):
    machine = synthetic()
    table = StepTable(machine)
    state = mine = State(current, -1, 0, cooldown)  # also states a hot swap may start from
    for cell, sla_ok, override in steps:
        cell = OUT_OF_ENVELOPE if cell >= machine.n_cells else cell
        state, token, reason = machine.step(state, cell, sla_ok, override)
        mine, my_token, my_reason = table.step(mine, cell, sla_ok, override)
        assert (mine, my_token, my_reason) == (state, token, reason)


def test_a_table_that_ignored_the_allowed_mask_would_be_caught():
    """The check can fail: cells 0 and 5 share a proposal but not a mask, and step tells them apart."""
    machine = synthetic()
    table = StepTable(machine)
    on_turbo = State(2, -1, 0, 0)
    assert table.step(on_turbo, 0) != table.step(on_turbo, 5)
    assert table.cell_class[0] != table.cell_class[5]


def test_a_table_with_a_small_memory_budget_starts_new_generations_and_still_equals_step():
    machine = synthetic()
    table = StepTable(machine, max_bytes=1)
    assert table.max_nodes == 16
    state = mine = machine.initial_state()
    rng = random.Random(3)
    for _ in range(5000):
        cell, sla_ok = rng.randrange(-1, machine.n_cells), rng.random() > 0.05
        override = rng.choice([None] * 8 + [1, 3, 2])
        state, token, reason = machine.step(state, cell, sla_ok, override)
        mine, my_token, my_reason = table.step(mine, cell, sla_ok, override)
        assert (mine, my_token, my_reason) == (state, token, reason)
        assert len(table._nodes) <= table.max_nodes
