"""`Controller.step`'s closure (`runtime._controller.quick_step`) against the controller's general cycle.

A controller with no observer answers `step` through its quick closure;
one with a recorder attached answers every cycle through `_cycle`. Run
side by side on the same events, the two must give the same decision,
state and SLA monitor state after every event, whatever the events:
long quiet stretches and SLA breaches, readings off the compiled binning
(None, ints, numpy floats, mappings, out of the envelope), overrides,
hot swaps and observers attached midway.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import SlaPath, runtime
from certfsm import load_artifact
from certfsm.runtime._audit_format import StepRecord
from certfsm.sla import SlaMonitor

ODD_VALUES = [math.nan, math.inf, -math.inf, None, 50, np.float64(50.0), -1.0, 1e6, 20.0, 100.0]


@pytest.fixture(scope="module")
def artifact_path(distilled_example):
    return distilled_example[2]


@pytest.fixture(scope="module")
def machine(artifact_path):
    return runtime.load_machine(artifact_path)


def _pair(artifact_path):
    """Two controllers of the example, each with the spec's SLA path and one scoped to INT4 (so that the token the
    closure hands the monitor matters): the first steps through its closure, the second (a recorder attached)
    through the general cycle."""
    machine = runtime.load_machine(artifact_path)
    paths = (
        *SlaMonitor.from_document(load_artifact(artifact_path).spec).paths,
        SlaPath(
            name="int4",
            metric="latency_ms",
            limit=10.0,
            window=4,
            max_violations=0,
            recovery_cycles=2,
            tokens=("INT4",),
        ),
    )
    quick = runtime.load(artifact_path, sla=SlaMonitor(paths, tokens=machine.tokens))
    general = runtime.load(
        artifact_path, sla=SlaMonitor(paths, tokens=machine.tokens), record=lambda *decision_and_inputs: None
    )
    return quick, general


def test_a_controller_without_observers_steps_through_its_closure_and_with_them_through_the_general_cycle(
    artifact_path, machine
):
    quick, general = _pair(artifact_path)
    assert quick.step.__qualname__ == "quick_step.<locals>.step"
    assert general.step == general._step_observed
    before = quick.step
    quick.swap(machine)
    assert quick.step is not before and quick.step.__qualname__ == "quick_step.<locals>.step"
    quick.attach_counters(runtime.RuntimeCounters(machine.tokens))
    assert quick.step == quick._step_observed


@st.composite
def events(draw, machine):
    """A run: mostly steps (quiet stretches of good latencies, bursts of bad ones, readings held long enough to
    switch tokens), some overrides and swaps."""
    overridable = [machine.tokens[k] for k in sorted(machine.params.overridable)]
    lows = [edges[0] for edges in machine.edges]
    highs = [edges[-1] for edges in machine.edges]
    switching = [cell for cell, token in enumerate(machine.proposal) if token != machine.params.conservative]
    run = []
    for _ in range(draw(st.integers(1, 150))):
        kind = draw(st.sampled_from(["step"] * 12 + ["hold"] * 2 + ["override", "clear", "swap", "burst"]))
        if kind == "step":
            row = [draw(st.floats(low, high)) for low, high in zip(lows, highs)]
            if draw(st.integers(0, 9)) == 0:
                row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from(ODD_VALUES))
            as_mapping = draw(st.integers(0, 9)) == 0
            latency = draw(
                st.sampled_from([4.0, 4.0, 4.0, 12.0, 20.0, 20.000000000000004, 30.0, None, math.nan, -math.inf])
            )
            metrics = draw(st.sampled_from([{"latency_ms": latency}, {"latency_ms": latency}, None, {}]))
            run.append(("step", dict(zip(machine.names, row)) if as_mapping else row, metrics))
        elif kind == "hold":  # a cell proposing another token, long enough to switch to it; often a swap then
            row = list(machine.cell_bounds(draw(st.sampled_from(switching)))[0])
            run.extend([("step", row, {"latency_ms": 4.0})] * 12 + [("step", row, {"latency_ms": 12.0})] * 2)
            if draw(st.booleans()):
                run.append(("swap",))
        elif kind == "burst":
            run.extend([("step", [0.5 * (low + high) for low, high in zip(lows, highs)], {"latency_ms": 50.0})] * 3)
        elif kind == "override" and overridable:
            run.append(("override", draw(st.sampled_from(overridable)), draw(st.sampled_from([None, 1, 3]))))
        elif kind == "clear":
            run.append(("override", None, None))
        elif kind == "swap":
            run.append(("swap",))
    return run


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_the_closure_decides_as_the_general_cycle_on_random_runs(artifact_path, machine, data):
    run = data.draw(events(machine), label="run")
    quick, general = _pair(artifact_path)
    for k, event in enumerate(run):
        if event[0] == "step":
            _, reading, metrics = event
            got, expected = quick.step(reading, metrics), general.step(reading, metrics)
            assert got == expected and type(got) is type(expected), f"event {k}: {event}"
        elif event[0] == "override":
            for controller in (quick, general):
                controller.override(event[1], cycles=event[2])
        else:
            assert quick.swap(machine) == general.swap(machine)
        assert quick.state == general.state, f"event {k}"
        assert quick._sla.snapshot() == general._sla.snapshot(), f"event {k}"


def test_concurrent_steps_through_the_closure_form_one_chain_of_machine_steps(artifact_path, machine):
    """Four threads step one controller without observers: every cycle counted once by the SLA monitor, and the
    decisions, taken in the order the monitor saw them (under the controller's lock), are `Machine.step` in turn."""
    order = []

    class Witness:
        """An SLA monitor that is always ok and notes, under the controller's lock, which cycle came when."""

        def update_ok(self, metrics, token):
            order.append(metrics["cycle"])
            return True

    controller = runtime.Controller(machine, sla=Witness())
    assert controller.step.__qualname__ == "quick_step.<locals>.step"
    rng = np.random.default_rng(12)
    rows = rng.uniform(0, 100, size=(4, 500, 5)).tolist()
    decided = {}

    def work(part: int) -> None:
        for k, row in enumerate(rows[part]):
            decided[(part, k)] = controller.step(row, {"cycle": (part, k)})

    threads = [threading.Thread(target=work, args=(part,)) for part in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(order) == len(set(order)) == 2000
    state = machine.initial_state()
    for part, k in order:
        cell = machine.cell_of(rows[part][k])
        state, token, reason = machine.step(state, cell)
        decision = decided[(part, k)]
        assert (decision.state, decision.index, decision.reason) == (state, token, reason)
        assert decision.cell == cell
    assert controller.state == state


def test_a_step_kept_from_before_a_swap_or_an_attached_log_still_decides_with_the_new_machine_and_logs(
    artifact_path, machine, tmp_path
):
    """Callers keep `step = controller.step` for speed; a later audit log, counters or hot swap must hold for them."""
    controller = runtime.load(artifact_path)
    kept = controller.step
    switching = next(cell for cell, token in enumerate(machine.proposal) if token != machine.params.conservative)
    row = list(machine.cell_bounds(switching)[0])
    writer = runtime.open_audit(controller, tmp_path / "run.log")
    for k in range(4):
        kept(row, {"latency_ms": 4.0}, now=float(k))
    counters = runtime.RuntimeCounters(machine.tokens)
    controller.attach_counters(counters)
    kept(row, {"latency_ms": 4.0}, now=4.0)
    writer.close()
    assert counters.snapshot().steps == 1
    assert [record.time for record in runtime.read_log(tmp_path / "run.log") if isinstance(record, StepRecord)] == [
        0.0,
        1.0,
        2.0,
        3.0,
        4.0,
    ]

    conservative_only = dataclasses.replace(machine, proposal=(machine.params.conservative,) * machine.n_cells)
    controller = runtime.Controller(machine)
    kept = controller.step
    controller.swap(conservative_only)
    assert all(kept(row).index == machine.params.conservative for _ in range(12))
