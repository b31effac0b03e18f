"""Replay: a logged run, re-executed record by record, reproduces every decision; a forged decision is found.

The runs go through the whole runtime (compiled binning, step table, SLA
monitor, overrides, a hot swap, rotation, fsync every 1 000 records), so
the replay checks them against the log they wrote: the oracle is the run
itself.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from certfsm.machine import Reason
from certfsm.runtime import AuditWriter, load, open_audit, read_log, replay_log, verify_log
from certfsm.runtime._audit_format import OverrideRecord, StepRecord, SwapRecord
from certfsm.runtime._audit_read import read_header

CHUNK = 10_000


@pytest.fixture(scope="module")
def artifact_path(distilled_example):
    return distilled_example[2]


def run_logged(artifact_path, log, steps: int, seed: int = 0, rotate_bytes: int | None = None) -> Counter:
    """Run the example controller for `steps` cycles with an audit log; returns how often each reason came."""
    controller = load(artifact_path)
    reasons: Counter = Counter()
    rng = np.random.default_rng(seed)
    overridable = sorted(controller.machine.tokens[k] for k in controller.machine.params.overridable)
    latencies = [{"latency_ms": 4.0}, {"latency_ms": 30.0}, {}]
    upper = np.array([100.0, 100.0, 100.0, 110.0, 64.0])
    with open_audit(controller, log, fsync_every=1000, rotate_bytes=rotate_bytes):
        for start in range(0, steps, CHUNK):
            count = min(CHUNK, steps - start)
            rows = rng.uniform(0.0, upper, size=(count, 5))
            rows[:, 3] = rng.choice([50.0, 100.0, 70.0], size=count, p=[0.6, 0.2, 0.2])
            rows[rng.random(count) < 0.005, int(rng.integers(5))] = math.nan
            rows[rng.random(count) < 0.005, int(rng.integers(5))] = 1e6
            cycles = np.arange(start, start + count)
            metric = np.where((cycles // 200) % 10 == 3, 1, np.where(rng.random(count) < 0.001, 2, 0)).tolist()
            events = rng.random(count).tolist()
            for k, (row, m, event) in enumerate(zip(rows.tolist(), metric, events)):
                if event < 0.001:
                    controller.override(overridable[k % len(overridable)], cycles=1 + k % 20)
                if start + k == steps // 2:
                    controller.swap(controller.machine)
                reasons[controller.step(row, latencies[m], float(start + k)).reason] += 1
    return reasons


def test_a_logged_run_replays_with_every_decision_reproduced(artifact_path, tmp_path):
    log = tmp_path / "run.log"
    reasons = run_logged(artifact_path, log, 20_000, rotate_bytes=600_000)
    assert (tmp_path / "run.log.1").exists()  # the chain ran across a rotation
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == 20_000, outcome
    assert {Reason.SWITCH, Reason.FALLBACK_SLA, Reason.FALLBACK_ENVELOPE, Reason.OVERRIDE} <= set(reasons)


@pytest.mark.slow
def test_a_million_step_log_replays_with_every_decision_reproduced(artifact_path, tmp_path):
    log = tmp_path / "million.log"
    reasons = run_logged(artifact_path, log, 1_000_000, seed=1)
    assert sum(reasons.values()) == 1_000_000 and len(reasons) >= 8
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == 1_000_000, outcome


def test_a_forged_decision_chained_correctly_is_a_divergence_at_its_record(artifact_path, tmp_path):
    """The chain cannot tell a forger who re-chains the log; the replay can: one step claims another token."""
    log, forged = tmp_path / "run.log", tmp_path / "forged.log"
    run_logged(artifact_path, log, 1500)
    records = list(read_log(log))
    target = next(r.index for r in records if isinstance(r, StepRecord) and r.index >= 700)
    original = read_header(log)
    with AuditWriter(forged, original.artifact_sha256, original.input_names, original.metric_names,
                     fsync_every=0) as writer:
        for record in records:
            if isinstance(record, StepRecord):
                token = (record.token + 1) % 5 if record.index == target else record.token
                writer.append_step(record.time, record.reading, record.metrics, record.cell, token, record.code,
                                   record.reason, record.state, record.sla_ok, record.override)
            elif isinstance(record, OverrideRecord):
                writer.append_override(record.time, record.token, record.cycles)
            elif isinstance(record, SwapRecord):
                writer.append_swap(record.time, record.old_sha256, record.new_sha256, record.state)
    assert verify_log(forged).ok
    outcome = replay_log(forged, [artifact_path])
    assert not outcome.ok and outcome.first_divergence == target
    assert outcome.reason.startswith(f"record {target}: the replay gives token ")
