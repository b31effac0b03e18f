"""certfsm.runtime: run a certified controller.

- `load(path) -> Controller`: the artifact through the core loader (hash,
  canonical form, structure, every required certificate entry proved);
  anything else is refused with the loader's one-line message.
- `Controller.step(reading, metrics=..., now=...) -> Decision` one cycle
  (`step_fixed` for fixed-point integers), `decide_many(readings)` a batch
  of table decisions, `override(token, cycles)`, `swap(machine)` between
  two cycles.

Importing this package pulls in neither certfsm.verify, the distillation
and proof modules of certfsm.fsm, onnx, onnxruntime, maraboupy, z3 nor
matplotlib: the decisions are `certfsm.machine.Machine.step`, standard
library only.
"""

from __future__ import annotations

from certfsm.machine import Machine, Reason, State

from ._controller import Controller, Decision


def load(path, *, sla=True, record=None) -> Controller:
    """A controller for the certified artifact at `path`; ArtifactError (one line) for anything the loader refuses.

    `sla`: True monitors the SLA paths of the artifact's own spec
    (`certfsm.sla`; none when the spec has none), False monitors nothing,
    or give a monitor. `record` receives every decision (the audit log).
    """
    from certfsm._artifact import load_artifact

    artifact = load_artifact(path)
    if sla is True:
        from certfsm.sla import SlaMonitor

        monitor = SlaMonitor.from_document(artifact.spec)
        sla = monitor if monitor.paths else None
    return Controller(Machine.from_artifact(artifact), sla=sla or None, record=record)


def load_machine(path) -> Machine:
    """The machine of the certified artifact at `path`, through the core loader (which refuses uncertified files)."""
    from certfsm._artifact import load_artifact

    return Machine.from_artifact(load_artifact(path))


__all__ = ["Controller", "Decision", "Machine", "Reason", "State", "load", "load_machine"]
