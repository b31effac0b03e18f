"""The state machine around the table: one pure step function, used by everything else.

The runtime, the Verilog reference model, the explicit-state enumeration
and the replay of every counterexample all call `step`; nothing else
implements the semantics in Python. (The Z3 encoding in
`_machine_proofs` is the one other statement of it, and the tests check
it against `step`.) The machine sees a cell only through two values: the
table's proposal for the cell and the cell's allowed-token row. That is
what lets every proof replace the cells by their distinct
(proposal, allowed row) classes.

One cycle, in priority order (DESIGN, "State machine, one step per
cycle"); the first rule that applies decides, and its reason code is
reported:

1. out of envelope, or SLA violated: emit the conservative token
   (FALLBACK_ENVELOPE, or FALLBACK_SLA when only the SLA failed);
2. the current token is not allowed in this cell: switch to the
   conservative token at once (LEGALITY_PREEMPT);
3. an override that names an overridable token allowed in this cell is
   obeyed (OVERRIDE): a move to the conservative token, or staying on the
   current token, is immediate; a move to any other token still waits for
   the cooldown to expire (OVERRIDE_WAITING meanwhile), so that switches
   to non-conservative tokens stay at least `cooldown_cycles` apart
   whoever asks for them. An override that is not overridable, or
   forbidden in this cell, is ignored: the table path below decides the
   token and the reason reports the refusal (OVERRIDE_REFUSED_*);
4. the table proposes the conservative token while the current token is
   another: move down at once (MOVE_DOWN);
5. the table proposes a token t other than the current one: t must be
   proposed for `confirm_cycles` consecutive cycles and the cooldown must
   have expired; then SWITCH, else HOLD_CONFIRMING (not yet confirmed) or
   HOLD_COOLDOWN (confirmed, cooldown running);
6. otherwise keep the current token (KEEP_CURRENT).

Counting and timing, precisely:

- The cycle in which t is first proposed counts as 1; each following
  cycle in which the table path sees t again adds 1 (saturating at
  `confirm_cycles`). Any cycle that does not reach rule 5 with t (a
  different proposal, a proposal equal to the current token, a fallback,
  a pre-emption, an obeyed override) clears the candidate.
- Each cycle first counts the cooldown down by one (never below 0); the
  switch test (rules 3 and 5) needs the counted-down value to be 0.
  Rules 1, 2, 4, a switch and an obeyed override that moves away from
  the current token then restart it at `cooldown_cycles`. So after a
  restart in cycle k, the earliest switch to a non-conservative token is
  in cycle k + cooldown_cycles.
- The emitted token is always the new current token.

Initial state: the conservative token, no candidate, cooldown 0.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field

from certfsm._errors import SpecError
from certfsm.verify._result import VERDICTS, VIOLATED

NO_CANDIDATE = -1


class Reason(enum.IntEnum):
    """Why the machine emitted its token this cycle. Stable values (4 bits): hardware outputs them."""

    KEEP_CURRENT = 0
    SWITCH = 1
    HOLD_CONFIRMING = 2
    HOLD_COOLDOWN = 3
    MOVE_DOWN = 4
    LEGALITY_PREEMPT = 5
    FALLBACK_ENVELOPE = 6
    FALLBACK_SLA = 7
    OVERRIDE = 8
    OVERRIDE_WAITING = 9
    OVERRIDE_REFUSED_NOT_OVERRIDABLE = 10
    OVERRIDE_REFUSED_FORBIDDEN = 11


@dataclass(frozen=True)
class MachineParams:
    """What the step function needs to know, by output index (never by name).

    Invariants: 1 <= n_tokens <= 16; `conservative` is in `legal`;
    `overridable` is a subset of `legal`; `confirm_cycles` >= 1;
    `cooldown_cycles` >= 0; `codes` holds one distinct 4-bit code per
    token. `legal` is not used by `step` (the table's proven invariant
    keeps proposals legal); the properties are stated against it.
    """

    n_tokens: int
    conservative: int
    confirm_cycles: int
    cooldown_cycles: int
    overridable: frozenset[int]
    codes: tuple[int, ...]
    legal: frozenset[int] = field(default=None)

    def __post_init__(self) -> None:
        legal = frozenset(range(self.n_tokens)) if self.legal is None else frozenset(int(t) for t in self.legal)
        object.__setattr__(self, "legal", legal)
        object.__setattr__(self, "overridable", frozenset(int(t) for t in self.overridable))
        object.__setattr__(self, "codes", tuple(int(c) for c in self.codes))
        problems = []
        if not 1 <= self.n_tokens <= 16:
            problems.append(f"n_tokens={self.n_tokens} is outside 1..16")
        if not legal <= set(range(self.n_tokens)):
            problems.append(f"legal={sorted(legal)} names tokens outside 0..{self.n_tokens - 1}")
        if self.conservative not in legal:
            problems.append(f"conservative={self.conservative} is not in legal={sorted(legal)}")
        if not self.overridable <= legal:
            problems.append(f"overridable={sorted(self.overridable)} is not a subset of legal={sorted(legal)}")
        if self.confirm_cycles < 1:
            problems.append(f"confirm_cycles={self.confirm_cycles} is below 1")
        if self.cooldown_cycles < 0:
            problems.append(f"cooldown_cycles={self.cooldown_cycles} is negative")
        if (len(self.codes) != self.n_tokens or len(set(self.codes)) != len(self.codes)
                or not all(0 <= c <= 15 for c in self.codes)):
            problems.append(f"codes={list(self.codes)} is not one distinct 4-bit code per token")
        if problems:
            raise SpecError(f"MachineParams: {problems[0]}; build the parameters with MachineParams.from_spec")

    @classmethod
    def from_spec(cls, spec) -> "MachineParams":
        return cls(n_tokens=spec.n_outputs, conservative=spec.conservative_index,
                   confirm_cycles=spec.confirm_cycles, cooldown_cycles=spec.cooldown_cycles,
                   overridable=frozenset(spec.output_index(t) for t in spec.overridable),
                   codes=tuple(spec.tokens[t] for t in spec.outputs), legal=frozenset(spec.legal_indices))

    @functools.cached_property
    def legal_codes(self) -> frozenset[int]:
        return frozenset(self.codes[t] for t in self.legal)

    def describe(self) -> str:
        """One line naming every parameter (for SMT-LIB headers and reports)."""
        return (f"n_tokens={self.n_tokens} conservative={self.conservative} legal={sorted(self.legal)} "
                f"overridable={sorted(self.overridable)} confirm_cycles={self.confirm_cycles} "
                f"cooldown_cycles={self.cooldown_cycles} codes={list(self.codes)}")


@dataclass(frozen=True, slots=True)
class State:
    """The machine's registers: the current token, the candidate being confirmed and its count, the cooldown.

    Reachable states satisfy: candidate == NO_CANDIDATE and count == 0, or
    candidate is a token and 1 <= count <= confirm_cycles; and
    0 <= cooldown <= cooldown_cycles.
    """

    current: int
    candidate: int = NO_CANDIDATE
    count: int = 0
    cooldown: int = 0


def initial_state(params: MachineParams) -> State:
    return State(params.conservative, NO_CANDIDATE, 0, 0)


def step(params: MachineParams, state: State, proposal, allowed_row, in_envelope: bool, sla_ok: bool,
         override=None) -> tuple[State, int, Reason]:
    """One cycle: (next state, emitted token index, reason). Pure and total.

    `proposal` and `allowed_row` (indexable by token, truthy where the
    token may be emitted in the cell) are read only when `in_envelope`;
    pass None for both otherwise. `override` is None or any integer; one
    that is not an overridable token is refused. Numpy integers are
    accepted; the returned state and token are Python ints.
    """
    conservative = params.conservative
    restart = params.cooldown_cycles
    counted_down = state.cooldown - 1 if state.cooldown > 0 else 0
    if not in_envelope or not sla_ok:
        reason = Reason.FALLBACK_ENVELOPE if not in_envelope else Reason.FALLBACK_SLA
        return State(conservative, NO_CANDIDATE, 0, restart), conservative, reason
    if not allowed_row[state.current]:
        return State(conservative, NO_CANDIDATE, 0, restart), conservative, Reason.LEGALITY_PREEMPT
    refusal = None
    if override is not None:
        if override not in params.overridable:
            refusal = Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE
        elif not allowed_row[override]:
            refusal = Reason.OVERRIDE_REFUSED_FORBIDDEN
        else:
            return _forced(params, state, override, counted_down)
    next_state, output, reason = _table_path(params, state, proposal, counted_down)
    return next_state, output, (reason if refusal is None else refusal)


def _forced(params: MachineParams, state: State, override: int, counted_down: int) -> tuple[State, int, Reason]:
    current, override = state.current, int(override)
    if override == current:
        return State(current, NO_CANDIDATE, 0, counted_down), current, Reason.OVERRIDE
    if override == params.conservative or counted_down == 0:
        return State(override, NO_CANDIDATE, 0, params.cooldown_cycles), override, Reason.OVERRIDE
    return State(current, NO_CANDIDATE, 0, counted_down), current, Reason.OVERRIDE_WAITING


def _table_path(params: MachineParams, state: State, proposal: int, counted_down: int) -> tuple[State, int, Reason]:
    current, proposal = state.current, int(proposal)
    if proposal == current:
        return State(current, NO_CANDIDATE, 0, counted_down), current, Reason.KEEP_CURRENT
    if proposal == params.conservative:
        return State(proposal, NO_CANDIDATE, 0, params.cooldown_cycles), proposal, Reason.MOVE_DOWN
    confirm = params.confirm_cycles
    count = min(state.count + 1, confirm) if state.candidate == proposal else 1
    if count >= confirm and counted_down == 0:
        return State(proposal, NO_CANDIDATE, 0, params.cooldown_cycles), proposal, Reason.SWITCH
    reason = Reason.HOLD_CONFIRMING if count < confirm else Reason.HOLD_COOLDOWN
    return State(current, proposal, count, counted_down), current, reason


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
            lines.append(f"cycle {k}: {s.before} + {s.inputs.describe()} -> token {s.output} "
                         f"({s.reason.name}), {s.after}")
        return "\n".join(lines)


def replay(params: MachineParams, inputs, step_function=step) -> Trace:
    """Run `inputs` (MachineInput) from the initial state through `step_function` (by default `step`)."""
    state = initial_state(params)
    steps = []
    for item in inputs:
        after, output, reason = step_function(params, state, item.proposal, item.allowed, item.in_envelope,
                                              item.sla_ok, item.override)
        steps.append(TraceStep(state, item, after, output, Reason(reason)))
        state = after
    return Trace(tuple(steps))


# ------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Proof:
    """One property of the machine or of its table: verdict, engine, time, and the evidence.

    ``proved`` comes only from an UNSAT answer (engine "z3") or from a
    complete enumeration (engine "explicit"); ``violated`` only with a
    concrete counterexample that was confirmed by replay: a `trace` for
    machine properties, a `cell` for table properties. Everything else is
    ``unknown`` with a `reason`. `smt2_path` and `smt2_sha256` name the
    SMT-LIB 2.6 file of a Z3 proof.
    """

    property: str
    verdict: str
    engine: str
    seconds: float
    reason: str = ""
    trace: Trace | None = None
    cell: int | None = None
    smt2_path: str | None = None
    smt2_sha256: str | None = None
    stats: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} is not one of {VERDICTS}")
        has_evidence = self.trace is not None or self.cell is not None
        if self.verdict == VIOLATED and not has_evidence:
            raise ValueError("a violated verdict needs its counterexample (trace or cell)")
        if self.verdict != VIOLATED and has_evidence:
            raise ValueError(f"a {self.verdict} verdict carries no counterexample")
