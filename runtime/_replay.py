"""Replay: re-execute every logged step and show that each decision is reproduced, bit for bit.

The log is walked once (`_audit_read._Walk`: every frame verified against
its chain before it is used). A fresh controller for the artifact the log
names runs the logged readings, metrics and override requests through
the same `Controller` code the run used, each reading by the path it was
given to (real values by `step`'s binning, fixed-point integers by
`step_fixed`'s); the cell, token, code, reason, state and SLA verdict
must equal the logged ones. A swap record moves the replay to the
artifact it names (it must be among the artifacts given), and the state
it continues from must be the logged one; a refusal record changes
nothing (the machine in force went on). The first
divergence stops the replay and is reported with its record index; a log
that does not verify is reported as such, also when a divergence came
before its bad record.

Step frames are unpacked straight into a tuple and compared as one,
without building a `StepRecord` per step: a replay of a million steps
is a test and a routine audit, and takes a few seconds this way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certfsm import AuditLogError
from certfsm.machine import Machine

from ._audit_format import (
    FLAG_OVERRIDE,
    FLAG_SLA_OK,
    KIND_STEP,
    KIND_STEP_FIXED,
    KIND_SWAP,
    FrameLayout,
    Registers,
    step_body,
)
from ._audit_read import LogVerification, _Walk, read_header, verify_log
from ._controller import Controller, spec_sla_monitor

if TYPE_CHECKING:
    from certfsm import Artifact

_COMPARED = (
    "cell",
    "token",
    "code",
    "reason",
    "flags (sla_ok)",
    "override",
    "state.current",
    "state.candidate",
    "state.count",
    "state.cooldown",
)


@dataclass(frozen=True)
class ReplayOutcome:
    """`ok` when every step was reproduced; else `first_divergence` (record index) and `reason`."""

    ok: bool
    steps: int
    first_divergence: int | None = None
    reason: str = ""


def replay_log(path: str | os.PathLike[str], artifacts: Iterable[str | os.PathLike[str] | Artifact]) -> ReplayOutcome:
    """Replay the log at `path` with the given artifacts (paths or loaded `Artifact`s), each loaded once.

    The replay starts on the artifact the log's header names, monitoring
    its spec's SLA paths as `certfsm run` does, and swaps to the others
    where the log swapped.
    """
    from certfsm import Artifact, load_artifact

    loaded = [a if isinstance(a, Artifact) else load_artifact(a) for a in artifacts]
    machines = {artifact.sha256: Machine.from_artifact(artifact) for artifact in loaded}
    specs = {artifact.sha256: artifact.stored_spec for artifact in loaded}
    first = _machine(read_header(path).artifact_sha256, machines)
    controller = Controller(first, sla=spec_sla_monitor(specs[first.artifact_sha256]))
    replay_step = controller.replay_step
    walk = _Walk(path)
    steps = 0
    layout: FrameLayout | None = None
    unpackers: dict[int, Callable[[bytes], tuple[Any, ...]]] = {}
    for frame_layout, body, chain in walk.frames():
        kind = body[0]
        if kind == KIND_STEP or kind == KIND_STEP_FIXED:
            if frame_layout is not layout:  # a new file: the same names, a new layout object
                layout = frame_layout
                n, m = len(layout.input_names), len(layout.metric_names)
                unpackers = {KIND_STEP: step_body(n, m).unpack, KIND_STEP_FIXED: step_body(n, m, fixed=True).unpack}
                metric_names, tail = layout.metric_names, 3 + n + m
            values = unpackers[kind](body)
            logged = values[tail:]
            flags = logged[4]
            decision = replay_step(
                values[3 : 3 + n],
                dict(zip(metric_names, values[3 + n : tail])),
                values[2],
                logged[5] if flags & FLAG_OVERRIDE else None,
                kind == KIND_STEP_FIXED,
            )
            index, code, reason, cell, state, sla_ok = decision[1:7]
            replayed = (
                cell,
                index,
                code,
                reason,
                (FLAG_SLA_OK if sla_ok else 0) | (flags & FLAG_OVERRIDE),
                logged[5],
                state.current,
                state.candidate,
                state.count,
                state.cooldown,
            )
            if replayed != logged:
                field, mine, theirs = next(item for item in zip(_COMPARED, replayed, logged) if item[1] != item[2])
                return _diverged(
                    path,
                    steps,
                    values[1],
                    f"record {values[1]}: the replay gives {field} {mine}, the log says {theirs}",
                )
            steps += 1
        elif kind == KIND_SWAP:
            record = frame_layout.decode_swap(body, chain)
            if record.old_sha256 != controller.machine.artifact_sha256:
                return _diverged(
                    path,
                    steps,
                    record.index,
                    f"the swap starts from artifact {record.old_sha256[:12]}, "
                    f"but the replay runs {controller.machine.artifact_sha256[:12]}",
                )
            controller.swap(_machine(record.new_sha256, machines))
            if _registers(controller.state) != _registers(record.state):
                return _diverged(
                    path,
                    steps,
                    record.index,
                    f"after the swap the replay is in state "
                    f"{_registers(controller.state)}, the log says {_registers(record.state)}",
                )
    verification = walk.verdict()
    if not verification.ok and not verification.torn:
        return _unverified(verification, steps)
    if verification.torn:
        return ReplayOutcome(
            True, steps, None, f"every decision reproduced up to the torn tail at record {verification.first_bad}"
        )
    return ReplayOutcome(True, steps)


def _diverged(path: str | os.PathLike[str], steps: int, index: int, reason: str) -> ReplayOutcome:
    """A divergence at record `index`, unless the log does not verify: then that is the finding."""
    verification = verify_log(path)
    if not verification.ok and not verification.torn:
        return _unverified(verification, steps)
    return ReplayOutcome(False, steps, index, reason)


def _unverified(verification: LogVerification, steps: int) -> ReplayOutcome:
    """The outcome of a log that does not verify (neither intact nor only torn): its first bad record."""
    return ReplayOutcome(False, steps, verification.first_bad, f"the log does not verify: {verification.describe()}")


def _machine(sha256: str, machines: dict[str, Machine]) -> Machine:
    if sha256 not in machines:
        raise AuditLogError(f"the log was written by artifact {sha256}, which was not given; give it with artifacts=")
    return machines[sha256]


def _registers(state: Registers) -> tuple[int, int, int, int]:
    return state.current, state.candidate, state.count, state.cooldown
