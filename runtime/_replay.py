"""Replay: re-execute every logged step and show that each decision is reproduced, bit for bit.

The log is read through `read_log` (every record verified against its
chain before it is used). A fresh controller for the artifact the log
names runs the logged readings, metrics and override requests through
the same `Controller` code the run used; the cell, token, reason, state
and SLA verdict must equal the logged ones. A swap record moves the
replay to the artifact it names (it must be among the artifacts given),
and the state it continues from must be the logged one. The first
divergence stops the replay and is reported with its record index.
"""

from __future__ import annotations

from dataclasses import dataclass

from certfsm import AuditLogError
from certfsm.machine import Machine

from ._audit_format import StepRecord, SwapRecord
from ._audit_read import read_header, read_log, verify_log
from ._controller import Controller, spec_sla_monitor


@dataclass(frozen=True)
class ReplayOutcome:
    """`ok` when every step was reproduced; else `first_divergence` (record index) and `reason`."""

    ok: bool
    steps: int
    first_divergence: int | None = None
    reason: str = ""


def replay_log(path, artifacts) -> ReplayOutcome:
    """Replay the log at `path` with the given artifacts (paths or loaded `Artifact`s), each loaded once.

    The replay starts on the artifact the log's header names, monitoring
    its spec's SLA paths as `certfsm run` does, and swaps to the others
    where the log swapped.
    """
    from certfsm import Artifact, load_artifact

    loaded = [a if isinstance(a, Artifact) else load_artifact(a) for a in artifacts]
    machines = {artifact.sha256: Machine.from_artifact(artifact) for artifact in loaded}
    specs = {artifact.sha256: artifact.spec for artifact in loaded}
    verification = verify_log(path)
    if not verification.ok and not verification.torn:
        return ReplayOutcome(False, 0, verification.first_bad, f"the log does not verify: {verification.describe()}")
    header = read_header(path)
    first = _machine(header.artifact_sha256, machines)
    controller = Controller(first, sla=spec_sla_monitor(specs[first.artifact_sha256]))
    steps = 0
    for record in read_log(path):
        if isinstance(record, SwapRecord):
            if record.old_sha256 != controller.machine.artifact_sha256:
                return ReplayOutcome(False, steps, record.index, f"the swap starts from artifact "
                                     f"{record.old_sha256[:12]}, but the replay runs {controller.machine.artifact_sha256[:12]}")
            controller.swap(_machine(record.new_sha256, machines))
            if _registers(controller.state) != _registers(record.state):
                return ReplayOutcome(False, steps, record.index, f"after the swap the replay is in state "
                                     f"{_registers(controller.state)}, the log says {_registers(record.state)}")
            continue
        if not isinstance(record, StepRecord):
            continue
        decision = controller.replay_step(record.reading, record.metrics, record.time, record.override)
        replayed = (decision.cell, decision.index, int(decision.reason), _registers(decision.state), decision.sla_ok)
        logged = (record.cell, record.token, record.reason, _registers(record.state), record.sla_ok)
        if replayed != logged:
            names = ("cell", "token", "reason", "state", "sla_ok")
            field, mine, theirs = next((n, a, b) for n, a, b in zip(names, replayed, logged) if a != b)
            return ReplayOutcome(False, steps, record.index,
                                 f"record {record.index}: the replay gives {field} {mine}, the log says {theirs}")
        steps += 1
    if verification.torn:
        return ReplayOutcome(True, steps, None, f"every decision reproduced up to the torn tail at record "
                                                f"{verification.first_bad}")
    return ReplayOutcome(True, steps)


def _machine(sha256: str, machines: dict[str, Machine]) -> Machine:
    if sha256 not in machines:
        raise AuditLogError(f"the log was written by artifact {sha256}, which was not given; give it with --artifact")
    return machines[sha256]


def _registers(state) -> tuple[int, int, int, int]:
    return state.current, state.candidate, state.count, state.cooldown

