"""A refined table runs: every path of the runtime decides by the reading's leaf, as `Machine.leaf_of` then
`Machine.step_leaf` do (docs/semantics.md, "State machine").

The refined artifact is made in the test from the certified coarse example
(`refined_tables.refined_artifact`: random trees under most cells, leaves
with random allowed tokens). The references are the plain rule text:
`Machine.leaf_of` (which walks `BoxTree.leaf_index`) and `Machine.step_leaf`
(the `step` the machine proofs cover); the runtime goes through its
twins (compiled binning, compiled leaf walks, the step table, the
vectorised leaf binning).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from certfsm import load_artifact
from certfsm.machine import Machine, State
from certfsm.runtime import Controller, load, open_audit, replay_log
from certfsm.runtime._step_table import REFINED_CELL, StepTable
from refined_tables import refined_artifact


@pytest.fixture(scope="module")
def refined_path(coarse_example, tmp_path_factory):
    return refined_artifact(coarse_example, tmp_path_factory.mktemp("refined") / "refined.cfsm", seed=3, share=0.8)


@pytest.fixture(scope="module")
def refined(refined_path) -> Machine:
    return Machine.from_artifact(load_artifact(refined_path))


@pytest.fixture(scope="module")
def flat(coarse_example) -> Machine:
    return Machine.from_artifact(load_artifact(coarse_example))


def readings(machine: Machine, count: int, seed: int) -> list[list]:
    """Random floats over the envelope and a little beyond, every leaf box's corners (thresholds exactly, and the
    float below), exact numbers near thresholds (Fractions, Decimals), NaN and None."""
    rng = random.Random(seed)
    low = [e[0] for e in machine.edges]
    high = [e[-1] for e in machine.edges]
    corners = []
    assert machine.refinement is not None
    for tree in machine.refinement.trees:
        for box in tree.boxes:
            corners.append([float(side.low) for side in box.intervals])
            corners.append([math.nextafter(float(side.high), -math.inf) for side in box.intervals])
            corners.append([side.high - Fraction(1, 2**70) for side in box.intervals])
            corners.append([decimal.Decimal(float(side.low)) for side in box.intervals])
    result = []
    for k in range(count):
        pick = rng.random()
        if pick < 0.4:
            result.append(list(rng.choice(corners)))
        else:
            reading = [rng.uniform(lo - 0.05 * (hi - lo), hi + 0.02 * (hi - lo)) for lo, hi in zip(low, high)]
            if pick > 0.98:
                reading[rng.randrange(len(reading))] = rng.choice([math.nan, None])
            result.append(reading)
    return result


def test_the_refined_artifact_refines_cells_into_leaves_of_several_tokens(refined):
    assert refined.refinement is not None and len(refined.refinement.cells) >= 8
    assert len({leaf.token for tree in refined.refinement.trees for leaf in tree.leaves}) >= 3


def test_step_decides_by_the_leaf_as_leaf_of_then_step_leaf_do(refined):
    controller = Controller(refined)
    state = refined.initial_state()
    rng = random.Random(5)
    overridable = sorted(refined.params.overridable)
    seen = set()
    for k, reading in enumerate(readings(refined, 6000, seed=1)):
        override = None
        if rng.random() < 0.02:
            override = rng.choice(overridable)
            controller.override(refined.tokens[override], cycles=1)
        decision = controller.step(reading)
        expected = refined.step_leaf(state, refined.leaf_of(reading), True, override)
        assert (decision.state, decision.index, decision.reason) == expected, (k, reading)
        assert decision.cell == refined.cell_of(reading)
        state = expected[0]
        seen.add(decision.reason)
    assert len(seen) >= 6, seen


def test_step_fixed_decides_by_the_leaf_of_the_integers(refined):
    controller = Controller(refined)
    state = refined.initial_state()
    scale = [1 << f for f in refined.frac_bits]
    for k, reading in enumerate(readings(refined, 3000, seed=2)):
        if any(v is None or v != v for v in reading):
            continue
        integers = [math.floor(Fraction(v) * s) for v, s in zip(reading, scale)]
        if k % 3 == 0:
            integers = tuple(integers)
        decision = controller.step_fixed(integers)
        expected = refined.step_leaf(state, refined.leaf_of_fixed(integers))
        assert (decision.state, decision.index, decision.reason) == expected, (k, integers)
        state = expected[0]


def test_decide_many_gives_each_row_its_leafs_token(refined):
    rows = [r for r in readings(refined, 4000, seed=3) if all(type(v) is float for v in r)]
    expected = [refined.params.conservative if (leaf := refined.leaf_of(r)) is None else leaf.token for r in rows]
    controller = Controller(refined)
    assert controller.decide_many(np.array(rows)).tolist() == expected
    exact = readings(refined, 500, seed=4)
    assert controller.decide_many(np.array(exact, dtype=object)).tolist() == [
        refined.params.conservative if (leaf := refined.leaf_of(r)) is None else leaf.token for r in exact
    ]
    flat_cells = [refined.cell_of(r) for r in rows]
    assert any(refined.proposal[c] != t for c, t in zip(flat_cells, expected) if c >= 0), (
        "no row where the leaf's token differs from its cell's flat entry: the test would not see cells read"
    )


def test_the_step_table_equals_step_leaf_on_every_reachable_state_and_leaf_class(refined):
    table = StepTable(refined)
    reference = StepTable(refined)
    pairs = {(leaf.token, leaf.allowed) for tree in refined.refinement.trees for leaf in tree.leaves}
    pairs |= {
        (p, a)
        for cell, (p, a) in enumerate(zip(refined.proposal, refined.allowed))
        if cell not in refined.refinement.cells
    }
    assert table.n_classes == len(pairs) + 1  # keyed by (proposal, mask), never by leaf: bounded by the tokens
    assert all(table.cell_class[cell] == REFINED_CELL for cell in refined.refinement.cells)
    states = table.reachable_states()
    assert len(states) > 20
    for state in states:
        for leaf, sla_ok, override in reference.input_classes():
            assert reference.step_leaf(state, leaf, sla_ok, override) == refined.step_leaf(
                state, leaf, sla_ok, override
            )
    for cell, tree in zip(refined.refinement.cells, refined.refinement.trees):
        for leaf in tree.leaves:
            for state in states[:40]:
                assert table.step_leaf(state, leaf) == refined.step_leaf(state, leaf)
        with pytest.raises(ValueError, match=rf"^cell {cell} is refined: its leaves decide"):
            table.step(states[0], cell)


def test_a_logged_refined_run_replays_with_every_decision_reproduced(refined, refined_path, tmp_path):
    controller = load(refined_path)  # with the spec's SLA monitor, as the replay runs it
    log = tmp_path / "refined.log"
    latencies = [{"latency_ms": 4.0}] * 9 + [{"latency_ms": 40.0}]
    with open_audit(controller, log, fsync_every=1000):
        for k, reading in enumerate(readings(refined, 3000, seed=6)):
            if k % 500 == 7:
                controller.override(refined.tokens[sorted(refined.params.overridable)[-1]], cycles=5)
            if k % 3 == 0 and all(v is not None and v == v for v in reading):
                controller.step_fixed(
                    [math.floor(Fraction(v) * (1 << f)) for v, f in zip(reading, refined.frac_bits)],
                    latencies[k % 10],
                    float(k),
                )
            else:
                controller.step(reading, latencies[k % 10], float(k))
    outcome = replay_log(log, [refined_path])
    assert outcome.ok and outcome.steps == 3000, outcome


def test_a_forged_decision_in_a_refined_log_is_found(refined, refined_path, tmp_path):
    """The replay is not vacuous: a log written by the flat entries of the same artifact (the cells' conservative
    tokens) diverges from the replay that reads leaves."""
    leafless = dataclasses.replace(refined, refinement=None)
    controller = load(refined_path)
    controller.swap(leafless)  # the same artifact hash, its flat entries only
    log = tmp_path / "leafless.log"
    with open_audit(controller, log, fsync_every=1000):
        for k, reading in enumerate(readings(refined, 2000, seed=7)):
            controller.step(reading, {"latency_ms": 4.0}, float(k))
    outcome = replay_log(log, [refined_path])
    assert not outcome.ok and "the replay gives" in outcome.reason, outcome


def test_float_reading_keeps_an_exact_value_in_its_leaf(refined):
    for tree in refined.refinement.trees:
        for box in tree.boxes[1:]:
            just_below = [side.low - Fraction(1, 2**80) for side in box.intervals]
            exact_leaf = refined.leaf_of(just_below)
            assert refined.leaf_of(list(refined.float_reading(just_below))) == exact_leaf


def test_hot_swaps_between_flat_and_refined_keep_deciding_by_the_machine_in_force(flat, refined):
    controller = Controller(flat)
    state = flat.initial_state()
    machine = flat
    rng = random.Random(9)
    last = None
    for k, reading in enumerate(readings(refined, 4000, seed=8)):
        if k % 400 == 399:
            machine = refined if machine is flat else flat
            controller.swap(machine)
            leaf = None if last is None else machine.leaf_of(last)
            current = (
                state.current if leaf is not None and leaf.allowed >> state.current & 1 else machine.params.conservative
            )
            state = State(current, -1, 0, min(state.cooldown, machine.params.cooldown_cycles))
            assert controller.state == state
        decision = controller.step(reading)
        expected = machine.step_leaf(state, machine.leaf_of(reading))
        assert (decision.state, decision.index, decision.reason) == expected, (k, reading)
        state, last = expected[0], reading
        rng.random()


def test_a_flat_machine_compiles_no_leaf_walks(flat):
    table = StepTable(flat)
    assert table.walks == {} and table.walks_fixed == {} and REFINED_CELL not in table.cell_class
