"""The state machine around the table: one pure step function, used by everything else.

The step function itself lives in the core (`certfsm.machine.step`, so
that the runtime runs it without this package); the runtime, the Verilog
reference model, the explicit-state enumeration and the replay of every
counterexample all call it; nothing else implements the semantics in
Python. (The Z3 encoding in
`_machine_proofs` is the one other statement of it, and the tests check
it against `step`.) The machine sees a cell only through two values: the
table's proposal for the cell and the cell's allowed-token row. That is
what lets every proof replace the cells by their distinct
(proposal, allowed row) classes.

The rules, their priority order, the counting and timing and the initial
state are stated once, in `certfsm.machine`'s docstring. This module adds
what the proofs need around `step`: machine inputs, traces and their
replay, and the `Proof` record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from certfsm.machine import NO_CANDIDATE, MachineParams, Reason, State, initial_state, step
from certfsm import VIOLATED, VerdictRecord

__all__ = [
    "NO_CANDIDATE",
    "MachineInput",
    "MachineParams",
    "Proof",
    "Reason",
    "State",
    "Trace",
    "TraceStep",
    "initial_state",
    "replay",
    "step",
]


# ------------------------------------------------------------- traces


@dataclass(frozen=True)
class MachineInput:
    """One cycle's inputs as the machine sees them (a cell reduced to its proposal and allowed row)."""

    proposal: int | None
    allowed: tuple[bool, ...] | None
    in_envelope: bool
    sla_ok: bool
    override: int | None = None

    def describe(self) -> str:
        parts = []
        if self.in_envelope:
            row = "".join("1" if a else "0" for a in self.allowed)
            parts.append(f"proposal={self.proposal} allowed={row}")
        else:
            parts.append("out-of-envelope")
        parts.append(f"sla_ok={self.sla_ok}")
        if self.override is not None:
            parts.append(f"override={self.override}")
        return " ".join(parts)


@dataclass(frozen=True)
class TraceStep:
    before: State
    inputs: MachineInput
    after: State
    output: int
    reason: Reason


@dataclass(frozen=True)
class Trace:
    """A run from the initial state: what a counterexample is. Replaying its inputs through `step` gives it back."""

    steps: tuple[TraceStep, ...]

    @property
    def inputs(self) -> tuple[MachineInput, ...]:
        return tuple(s.inputs for s in self.steps)

    def describe(self) -> str:
        lines = []
        for k, s in enumerate(self.steps):
            lines.append(
                f"cycle {k}: {s.before} + {s.inputs.describe()} -> token {s.output} ({s.reason.name}), {s.after}"
            )
        return "\n".join(lines)


def replay(params: MachineParams, inputs, step_function=step) -> Trace:
    """Run `inputs` (MachineInput) from the initial state through `step_function` (by default `step`)."""
    state = initial_state(params)
    steps = []
    for item in inputs:
        after, output, reason = step_function(
            params, state, item.proposal, item.allowed, item.in_envelope, item.sla_ok, item.override
        )
        steps.append(TraceStep(state, item, after, output, Reason(reason)))
        state = after
    return Trace(tuple(steps))


# ------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Proof(VerdictRecord):
    """One property of the machine or of its table: the core's verdict record with its evidence.

    ``proved`` comes only from an UNSAT answer (engine "z3") or from a
    complete enumeration (engine "explicit"); ``violated`` only with a
    concrete counterexample that was confirmed by replay: a `trace` for
    machine properties, a `cell` for table properties. Everything else is
    ``unknown`` with a `reason`. `smt2` and `smt2_sha256` name the
    SMT-LIB 2.6 file of a Z3 proof in the folder it was written to.
    """

    trace: Trace | None = None
    cell: int | None = None
    stats: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        has_evidence = self.trace is not None or self.cell is not None
        if self.verdict == VIOLATED and not has_evidence:
            raise ValueError("a violated verdict needs its counterexample (trace or cell)")
        if self.verdict != VIOLATED and has_evidence:
            raise ValueError(f"a {self.verdict} verdict carries no counterexample")
