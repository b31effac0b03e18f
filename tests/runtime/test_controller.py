"""The embedded controller: certified artifacts only, the step function's rules end to end, never a raise for values."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from certfsm import ArtifactError, load_artifact, runtime, write_artifact
from certfsm.machine import OUT_OF_ENVELOPE, Reason

COOL, HOT = 50.0, 100.0  # temperatures in the example: INT4 is forbidden from 85 degC on


@pytest.fixture(scope="module")
def artifact_path(distilled_example):
    return distilled_example[2]


@pytest.fixture
def controller(artifact_path):
    return runtime.load(artifact_path)


@pytest.mark.slow
def test_importing_the_runtime_pulls_in_no_solver_verifier_onnx_or_plotting(artifact_path):
    blocked = [
        "certfsm.verify",
        "certfsm.fsm",
        "onnx",
        "onnxruntime",
        "maraboupy",
        "z3",
        "matplotlib",
        "jsonschema",
        "prometheus_client",
    ]
    code = (
        f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
        "import certfsm.runtime as rt\n"
        f"ctl = rt.load({str(artifact_path)!r})\n"
        "print(ctl.step([50.0, 50.0, 50.0, 50.0, 10.0]).token)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in load_artifact(artifact_path).token_names


@pytest.mark.parametrize("value", [math.nan, math.inf, None, -1.0, 1e6])
def test_values_outside_the_envelope_give_the_conservative_token_and_never_raise(controller, value):
    decision = controller.step([50.0, 50.0, 50.0, value, 10.0])
    assert decision.cell == OUT_OF_ENVELOPE and decision.reason == Reason.FALLBACK_ENVELOPE
    assert decision.index == controller.machine.params.conservative


@pytest.mark.parametrize(
    "reading, error, message",
    [
        ([1.0, 2.0], ValueError, r"^reading has 2 values but the machine has 5 inputs"),
        ({"compute_util": 1.0, "warp": 2.0}, ValueError, r"^reading names unknown input 'warp'; the inputs are "),
        ([1.0, "x", 2.0, 3.0, 4.0], TypeError, r"^reading: input mem_bw_util = 'x' is not a number$"),
    ],
)
def test_a_malformed_reading_is_refused_before_anything_changes(controller, reading, error, message):
    before = controller.state
    with pytest.raises(error, match=message):
        controller.step(reading)
    assert controller.state == before


def test_a_reading_by_name_decides_as_the_same_reading_in_order(artifact_path):
    first, second = runtime.load(artifact_path), runtime.load(artifact_path)
    names = first.machine.names
    rng = np.random.default_rng(1)
    for row in rng.uniform(0, 100, size=(200, 5)).tolist():
        assert first.step(row) == second.step(dict(zip(names, row)))


def test_int4_is_never_emitted_when_hot_whatever_the_history(controller):
    """The spec's rule through the runtime: INT4 is forbidden from 85 degC, also right after it was chosen."""
    int4 = controller.machine.tokens.index("INT4")
    rng = np.random.default_rng(2)
    for _ in range(3000):
        row = rng.uniform(0, 100, size=5).tolist()
        row[3] = float(rng.choice([COOL, HOT, rng.uniform(20, 110)]))
        decision = controller.step(row)
        if row[3] >= 85:
            assert decision.index != int4


def test_decide_many_is_the_tables_decision_of_each_reading(controller):
    machine = controller.machine
    rng = np.random.default_rng(3)
    rows = rng.uniform(-10, 120, size=(5000, 5))
    rows[::97, 2] = np.nan
    batch = controller.decide_many(rows)
    expected = [
        machine.proposal[c] if c != OUT_OF_ENVELOPE else machine.params.conservative
        for c in (machine.cell_of(r) for r in rows.tolist())
    ]
    assert batch.tolist() == expected


def test_the_fixed_point_path_decides_as_the_real_path(artifact_path):
    real, fixed = runtime.load(artifact_path), runtime.load(artifact_path)
    bits = real.machine.frac_bits
    rng = np.random.default_rng(4)
    for row in rng.integers(-5, 110 * 64, size=(500, 5)).tolist():
        values = [math.ldexp(v, -b) for v, b in zip(row, bits)]
        assert real.step(values) == fixed.step_fixed(row)


def test_overrides_are_limited_to_overridable_tokens_and_still_lose_to_fallback(controller):
    machine = controller.machine
    overridable = sorted(machine.params.overridable)
    not_overridable = next(t for t in machine.tokens if machine.tokens.index(t) not in overridable)
    with pytest.raises(ValueError, match=r"^override token '.*' is not overridable; the spec allows "):
        controller.override(not_overridable)
    with pytest.raises(ValueError, match=r"^override token 'WARP' is not a token of this controller"):
        controller.override("WARP")
    if overridable:
        controller.override(machine.tokens[overridable[0]], cycles=2)
        fallback = controller.step([50.0, 50.0, 50.0, math.nan, 10.0])
        assert fallback.reason == Reason.FALLBACK_ENVELOPE


def test_concurrent_steps_keep_one_order_of_decisions(artifact_path):
    seen = []
    controller = runtime.load(artifact_path, record=lambda decision, *rest: seen.append(decision.state))
    rng = np.random.default_rng(5)
    rows = rng.uniform(0, 100, size=(4, 500, 5)).tolist()
    threads = [threading.Thread(target=lambda part=part: [controller.step(r) for r in part]) for part in rows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 2000 and seen[-1] == controller.state


def _rehashed(path, tmp_path, change) -> Path:
    """A copy of the artifact at `path` with `change(payload)` applied, written with its new hash by the one writer."""
    payload = json.loads(path.read_text())["payload"]
    change(payload)
    out = tmp_path / "edited.cfsm"
    write_artifact(out, payload)
    return out


def test_an_uncertified_or_damaged_artifact_is_refused_with_the_loaders_line(artifact_path, tmp_path):
    def unprove(payload):
        payload["certificate"][0]["verdict"] = "unknown"

    with pytest.raises(ArtifactError, match=r"certificate"):
        runtime.load(_rehashed(artifact_path, tmp_path, unprove))
    damaged = tmp_path / "damaged.cfsm"
    damaged.write_bytes(artifact_path.read_bytes()[:-5])
    with pytest.raises(ArtifactError):
        runtime.load(damaged)


def test_a_hot_swap_keeps_the_token_only_where_the_new_table_allows_it(artifact_path):
    controller = runtime.load(artifact_path)
    machine = controller.machine
    rng = np.random.default_rng(6)
    for row in rng.uniform(0, 100, size=(300, 5)).tolist():
        decision = controller.step(row)
    old, new = controller.swap(runtime.load_machine(artifact_path))
    assert old == new == machine.artifact_sha256
    state = controller.state
    if decision.cell != OUT_OF_ENVELOPE and machine.allowed[decision.cell] >> decision.index & 1:
        assert state.current == decision.index
    assert state.candidate == -1


def test_the_artifacts_own_sla_paths_make_the_machine_fall_back_in_the_breach_cycle(artifact_path):
    """The example's spec: latency_ms <= 20, at most 2 violations per 16 cycles, 32 good cycles to recover."""
    controller = runtime.load(artifact_path)
    row = [50.0, 50.0, 50.0, 50.0, 10.0]
    reasons = [controller.step(row, metrics={"latency_ms": 50.0}).reason for _ in range(3)]
    assert reasons[:2] != [Reason.FALLBACK_SLA] * 2 and reasons[2] == Reason.FALLBACK_SLA
    assert not controller.step(row, metrics={"latency_ms": 1.0}).sla_ok
    unmonitored = runtime.load(artifact_path, sla=False)
    assert all(unmonitored.step(row, metrics={"latency_ms": 50.0}).sla_ok for _ in range(5))


def test_the_controllers_decisions_are_machine_step_on_a_long_random_run(artifact_path):
    """The runtime decides through the compiled binning and the step table; cycle by cycle that must be
    `Machine.step` on `Machine.cell_of`, with SLA breaches, overrides, odd readings and a hot swap on the way."""
    from certfsm.sla import SlaMonitor

    controller = runtime.load(artifact_path)
    machine = controller.machine
    monitor = SlaMonitor.from_document(load_artifact(artifact_path).spec)
    state = machine.initial_state()
    rng = np.random.default_rng(11)
    overridable = sorted(machine.tokens[k] for k in machine.params.overridable)
    queued, left = None, 0
    for cycle in range(6000):
        row = rng.uniform(-5, 105, size=5).tolist()
        row[3] = float(rng.choice([COOL, HOT, rng.uniform(20, 110)]))
        if rng.random() < 0.03:
            row[int(rng.integers(5))] = [math.nan, None, math.inf, 50][int(rng.integers(4))]
        metrics = {"latency_ms": float(rng.choice([4.0, 30.0], p=[0.8, 0.2]))}
        if rng.random() < 0.02:
            queued, left = str(rng.choice(overridable)), int(rng.integers(1, 12))
            controller.override(queued, cycles=left)
        if cycle == 3000:
            controller.swap(machine)
            state = controller.state
        override = None
        if queued is not None:
            override, left = machine.tokens.index(queued), left - 1
            queued = None if left == 0 else queued
        sla_ok = monitor.update(metrics, machine.tokens[state.current]).ok
        reading = dict(zip(machine.names, row)) if cycle % 7 == 0 else row
        state, token, reason = machine.step(state, machine.cell_of(row), sla_ok, override)
        decision = controller.step(reading, metrics)
        assert (decision.state, decision.index, decision.reason, decision.sla_ok) == (state, token, reason, sla_ok), (
            cycle
        )
        assert decision.token == machine.tokens[token] and decision.code == machine.params.codes[token]
