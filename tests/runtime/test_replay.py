"""Replay: a logged run, re-executed record by record, reproduces every decision; a forged decision is found.

The runs go through the whole runtime (compiled binning, step table, SLA
monitor, overrides, a hot swap, rotation, fsync every 1 000 records), so
the replay checks them against the log they wrote: the oracle is the run
itself.
"""

from __future__ import annotations

import math
import os
from collections import Counter

import numpy as np
import pytest

from certfsm.machine import Reason
from certfsm.runtime import AuditWriter, load, open_audit, read_log, replay_log, verify_log
from certfsm.runtime._audit_format import KIND_STEP, KIND_STEP_FIXED, PREFIX, OverrideRecord, StepRecord, SwapRecord
from certfsm.runtime._audit_read import read_header

CHUNK = 10_000
PREFIX_SIZE = PREFIX.size


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


@pytest.mark.slow
def test_a_logged_run_replays_with_every_decision_reproduced(artifact_path, tmp_path):
    log = tmp_path / "run.log"
    reasons = run_logged(artifact_path, log, 20_000, rotate_bytes=600_000)
    assert (tmp_path / "run.log.1").exists()  # the chain ran across a rotation
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == 20_000, outcome
    assert {Reason.SWITCH, Reason.FALLBACK_SLA, Reason.FALLBACK_ENVELOPE, Reason.OVERRIDE} <= set(reasons)


LONG_RUN = int(os.environ.get("CERTFSM_LONG_RUN_STEPS", "200000"))
"""Steps of the long logged run: 200 000 cross every periodic event of `run_logged` hundreds of times (fsync,
SLA windows, overrides, the swap) in a tenth of a million steps' time; CERTFSM_LONG_RUN_STEPS=1000000 runs the
million-step log."""


@pytest.mark.slow
def test_a_long_log_replays_with_every_decision_reproduced(artifact_path, tmp_path):
    log = tmp_path / "long.log"
    reasons = run_logged(artifact_path, log, LONG_RUN, seed=1)
    assert sum(reasons.values()) == LONG_RUN and len(reasons) >= 8
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == LONG_RUN, outcome


def test_a_forged_decision_chained_correctly_is_a_divergence_at_its_record(artifact_path, tmp_path):
    """The chain cannot tell a forger who re-chains the log; the replay can: one step claims another token."""
    log, forged = tmp_path / "run.log", tmp_path / "forged.log"
    run_logged(artifact_path, log, 1500)
    records = list(read_log(log))
    target = next(r.index for r in records if isinstance(r, StepRecord) and r.index >= 700)
    original = read_header(log)
    with AuditWriter(
        forged, original.artifact_sha256, original.input_names, original.metric_names, fsync_every=0
    ) as writer:
        for record in records:
            if isinstance(record, StepRecord):
                token = (record.token + 1) % 5 if record.index == target else record.token
                writer.append_step(
                    record.time,
                    record.reading,
                    record.metrics,
                    record.cell,
                    token,
                    record.code,
                    record.reason,
                    record.state,
                    record.sla_ok,
                    record.override,
                )
            elif isinstance(record, OverrideRecord):
                writer.append_override(record.time, record.token, record.cycles)
            elif isinstance(record, SwapRecord):
                writer.append_swap(record.time, record.old_sha256, record.new_sha256, record.state)
    assert verify_log(forged).ok
    outcome = replay_log(forged, [artifact_path])
    assert not outcome.ok and outcome.first_divergence == target
    assert outcome.reason.startswith(f"record {target}: the replay gives token ")


# ------------------------------------------------------------- fixed point


def run_mixed(artifact_path, log, steps: int, fixed_every: int, seed: int = 4) -> None:
    """A logged run where every `fixed_every`-th cycle (all when 1) is given fixed-point integers through
    `step_fixed`, the others real values through `step`, with overrides, SLA breaches, odd values and a swap."""
    controller = load(artifact_path)
    bits = controller.machine.frac_bits
    overridable = sorted(controller.machine.tokens[k] for k in controller.machine.params.overridable)
    rng = np.random.default_rng(seed)
    upper = np.array([100.0, 100.0, 100.0, 110.0, 64.0])
    with open_audit(controller, log, fsync_every=0):
        for k in range(steps):
            row = rng.uniform(-2.0, upper + 2.0).tolist()
            metrics = {"latency_ms": 30.0 if (k // 150) % 5 == 2 else 4.0}
            if k % 97 == 13:
                controller.override(overridable[k % len(overridable)], cycles=1 + k % 9)
            if k == steps // 2:
                controller.swap(controller.machine)
            if k % fixed_every == 0:
                integers = [math.floor(math.ldexp(v, b)) for v, b in zip(row, bits)]
                if k % 53 == 7:
                    integers[k % 5] = (-1) ** k * 2**70  # far outside the envelope, beyond i64
                controller.step_fixed(integers, metrics, float(k))
            else:
                if k % 61 == 5:
                    row[k % 5] = None
                controller.step(row, metrics, float(k))


@pytest.mark.parametrize("fixed_every", [1, 3], ids=["fixed point", "mixed"])
def test_a_fixed_point_or_mixed_run_replays_with_every_decision_reproduced(artifact_path, tmp_path, fixed_every):
    log = tmp_path / "run.log"
    run_mixed(artifact_path, log, 3000, fixed_every)
    steps = [r for r in read_log(log) if isinstance(r, StepRecord)]
    assert sum(r.fixed for r in steps) == len(range(0, 3000, fixed_every))
    assert all(type(v) is int for r in steps if r.fixed for v in r.reading)
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == 3000, outcome


def test_a_changed_fixed_point_record_is_found_by_the_chain_and_stops_the_replay(artifact_path, tmp_path):
    from test_audit import split_frames

    log = tmp_path / "run.log"
    run_mixed(artifact_path, log, 400, 2)
    header, frames = split_frames(log)
    target = next(k for k, frame in enumerate(frames) if frame[0] == KIND_STEP_FIXED and k > 200)
    changed = bytearray(frames[target])
    changed[PREFIX_SIZE] ^= 0x01  # the first input's integer, one apart
    log.write_bytes(header + b"".join(frames[:target]) + bytes(changed) + b"".join(frames[target + 1 :]))
    verification = verify_log(log)
    assert not verification.ok and verification.first_bad == target
    assert "does not match its chain hash" in verification.reason
    outcome = replay_log(log, [artifact_path])
    assert not outcome.ok and outcome.first_divergence == target
    assert outcome.reason.startswith("the log does not verify: ")


def test_a_fixed_point_step_relabelled_real_and_chained_again_is_a_divergence_at_its_record(artifact_path, tmp_path):
    """The two step kinds have the same size; a forger who swaps the kind byte and re-chains passes the chain but
    not the replay, which bins the integers' bits as floats."""
    log = tmp_path / "run.log"
    run_mixed(artifact_path, log, 400, 2)
    target = next(
        r.index for r in read_log(log) if isinstance(r, StepRecord) and r.fixed and r.index > 100 and r.cell != -1
    )
    frames = rechained(log, lambda index, body: bytes([KIND_STEP]) + body[1:] if index == target else body)
    assert verify_log(frames).ok
    outcome = replay_log(frames, [artifact_path])
    assert not outcome.ok and outcome.first_divergence == target
    assert outcome.reason.startswith(f"record {target}: the replay gives cell -1, the log says ")


def rechained(log, change, version: int | None = None):
    """A copy of the one-file log `log` with each frame body passed through `change(index, body)`, the header's
    format version set to `version` (when given) and the chain computed again: what a forger can do."""
    import hashlib
    import struct

    from test_audit import split_frames

    header, frames = split_frames(log)
    header = bytearray(header)
    if version is not None:
        struct.pack_into("<H", header, 8, version)
        header[-32:] = hashlib.sha256(header[:-32]).digest()
    chain, out = bytes(header[-32:]), [bytes(header)]
    for index, frame in enumerate(frames):
        body = change(index, frame[:-32])
        chain = hashlib.sha256(chain + body).digest()
        out.append(body + chain)
    path = log.with_name(log.name + ".rechained")
    path.write_bytes(b"".join(out))
    return path


def test_a_version_1_log_still_verifies_reads_and_replays(artifact_path, tmp_path):
    """Version 1 logs hold real-valued steps only (kinds 1 to 4); a fixed-point kind in one is an unknown kind."""
    log = tmp_path / "run.log"
    run_logged(artifact_path, log, 2000)
    old = rechained(log, lambda index, body: body, version=1)
    assert read_header(old).format_version == 1 and verify_log(old).ok
    assert sum(isinstance(r, StepRecord) for r in read_log(old)) == 2000
    outcome = replay_log(old, [artifact_path])
    assert outcome.ok and outcome.steps == 2000, outcome
    mixed = tmp_path / "mixed.log"
    run_mixed(artifact_path, mixed, 50, 2)
    forged = rechained(mixed, lambda index, body: body, version=1)
    verification = verify_log(forged)
    assert not verification.ok and verification.first_bad == 0 and "unknown record kind 5" in verification.reason


def test_readings_that_no_float_holds_are_logged_as_floats_of_their_own_cells_and_replay(artifact_path, tmp_path):
    """A Fraction 2^-80 below an edge rounds to the edge, a Decimal likewise, a 400-digit integer overflows: the
    log keeps floats that bin into the cells the exact values were given, so the replay reproduces every step."""
    from decimal import Decimal
    from fractions import Fraction

    controller = load(artifact_path)
    machine = controller.machine
    middle = [(e[0] + e[1]) / 2 for e in machine.edges]
    log, cells, rounded_across = tmp_path / "exact.log", [], 0
    with open_audit(controller, log, fsync_every=0):
        for i, edges in enumerate(machine.edges):
            for edge in edges:
                for value in (
                    Fraction(edge) - Fraction(1, 2**80),
                    Fraction(edge) + Fraction(1, 2**80),
                    Decimal(repr(edge)) - Decimal("1e-30"),
                    10**400,
                    -(10**400),
                    np.longdouble(edge),
                ):
                    reading = list(middle)
                    reading[i] = value
                    cells.append(controller.step(reading, {"latency_ms": 1.0}).cell)
                    if value not in (10**400, -(10**400)):
                        rounded_across += machine.cell_of([float(v) for v in reading]) != cells[-1]
    logged = [r for r in read_log(log) if isinstance(r, StepRecord)]
    assert [r.cell for r in logged] == cells
    assert all(machine.cell_of(list(r.reading)) == r.cell for r in logged)
    assert rounded_across > 10  # plain float() would have logged these into other cells
    outcome = replay_log(log, [artifact_path])
    assert outcome.ok and outcome.steps == len(cells), outcome
