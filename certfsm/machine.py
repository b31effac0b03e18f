"""The certified machine, decoded once: binning, table, parameters, state and the one step function.

Everything that runs or re-states the certified machine goes through this
module: `certfsm.fsm` (distillation, proofs, explicit-state model), the
runtime, the replay of an audit log and the hardware export. It needs only
the Python standard library, so an embedded target runs the scalar path
(`Machine.cell_of`, `Machine.step`) without numpy, onnx or any solver.

`Machine.from_artifact` is the only decoder of an artifact's grid, table
and machine parameters; nothing else turns an artifact back into a
machine.

The step function, one cycle in priority order (docs/semantics.md,
"State machine"); the first rule that applies decides, and its reason
code is reported:

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

import bisect
import decimal
import enum
import functools
import itertools
import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterable, Sequence, TypeVar, cast

from ._decimal import decimal_value, float_at_least, float_at_most
from ._errors import SpecError

if TYPE_CHECKING:
    from ._artifact import Artifact
    from ._box_tree import Leaf, Refinement

OUT_OF_ENVELOPE = -1
"""What `Machine.cell_of` returns for a reading outside [min, max] in some input, or with a NaN or inf."""

NO_CANDIDATE = -1
_FLOATS = {float}


def exact_reading_value(name: str, value: Any, what: str) -> float | Fraction:
    """A reading value as a float (a float, or a number a float holds exactly) or an exact Fraction; NaN or an
    infinity of the same sign when it has no finite value. Never rounds: a longdouble, a Fraction or a
    400-digit int keeps its exact value. A number with no exact value is a TypeError naming the input."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, numbers.Integral):
        value = int(value)
        return float(value) if abs(value) <= 2**53 else Fraction(value)
    ratio = getattr(value, "as_integer_ratio", None)
    if ratio is None:
        raise TypeError(
            f"{what}: input {name} = {value!r:.40} is a {type(value).__name__}, which certfsm cannot "
            "compare exactly with the edges; pass a float, an int, a Fraction or a Decimal"
        )
    try:
        exact = Fraction(*ratio())
    except (ValueError, OverflowError):  # NaN or an infinity: no finite value
        return math.nan if value != value else (math.inf if value > 0 else -math.inf)
    return float(exact) if Fraction(float(exact)) == exact else exact


def _listed(names: Sequence[str], limit: int = 8) -> str:
    """`names` joined for a repr, the middle elided past `limit` so that a repr stays one short line."""
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join([*names[: limit - 2], "...", names[-1]]) + f" ({len(names)})"


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

    def __str__(self) -> str:
        """The name (``print(decision.reason)`` shows FALLBACK_SLA); `int(reason)` and comparisons give the code."""
        return self.name

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        """The code, as before: the machine proofs, the Verilog and the C write reasons into their text as
        ``f"{Reason.SWITCH}"``; `int.__format__` alone would take `__str__` for an empty spec."""
        return format(int(self), spec)


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
    legal: frozenset[int] = field(default=cast("frozenset[int]", None))  # None: every token (__post_init__)

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
        if (
            len(self.codes) != self.n_tokens
            or len(set(self.codes)) != len(self.codes)
            or not all(0 <= c <= 15 for c in self.codes)
        ):
            problems.append(f"codes={list(self.codes)} is not one distinct 4-bit code per token")
        if problems:
            raise SpecError(f"MachineParams: {problems[0]}; build the parameters with MachineParams.from_spec")

    @classmethod
    def from_spec(cls, spec: Any) -> MachineParams:
        """The parameters of a `certfsm.ControllerSpec` (not imported here: it needs jsonschema)."""
        return cls(
            n_tokens=spec.n_outputs,
            conservative=spec.conservative_index,
            confirm_cycles=spec.confirm_cycles,
            cooldown_cycles=spec.cooldown_cycles,
            overridable=frozenset(spec.output_index(t) for t in spec.overridable),
            codes=tuple(spec.tokens[t] for t in spec.outputs),
            legal=frozenset(spec.legal_indices),
        )

    @functools.cached_property
    def legal_codes(self) -> frozenset[int]:
        return frozenset(self.codes[t] for t in self.legal)

    def describe(self) -> str:
        """One line naming every parameter (for SMT-LIB headers and reports)."""
        return (
            f"n_tokens={self.n_tokens} conservative={self.conservative} legal={sorted(self.legal)} "
            f"overridable={sorted(self.overridable)} confirm_cycles={self.confirm_cycles} "
            f"cooldown_cycles={self.cooldown_cycles} codes={list(self.codes)}"
        )


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


def step(
    params: MachineParams,
    state: State,
    proposal: Any,
    allowed_row: Any,
    in_envelope: bool,
    sla_ok: bool,
    override: int | None = None,
) -> tuple[State, int, Reason]:
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


# ------------------------------------------------------------- bins


def c_order_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Per input of a grid of `shape` bins, how far one bin moves the flat C-order index (the last input varies
    fastest)."""
    strides, stride = [], 1
    for bins in reversed(shape):
        strides.append(stride)
        stride *= bins
    return tuple(reversed(strides))


def uniform_edges(low: float, high: float, bins: int) -> tuple[float, ...]:
    """The bins + 1 edges a spec's ``bins`` denotes over [low, high]: numpy's ``linspace``, bit for bit.

    The one definition that the spec loader and the artifact loader both
    use, so the edges of a spec that gives ``bins`` cannot differ between
    the two. Edge k is ``k * ((high - low) / bins) + low`` in float64 (or
    ``k / bins * (high - low) + low`` where that step underflows to 0, as
    numpy does), and the ends are exactly low and high. Whether the edges
    increase is the caller's check: a range too narrow for its bins gives
    repeated edges.
    """
    delta = high - low
    step = delta / bins
    interior = (
        [k * step + low for k in range(1, bins)] if step != 0 else [k / bins * delta + low for k in range(1, bins)]
    )
    return (low, *interior, high)


# ------------------------------------------------------------- fixed point


def reading_keys(edges: Sequence[float]) -> tuple[float, tuple[float, ...], float]:
    """(low, interior, high): the floats that bin a float reading exactly as the decimal edges say.

    Edges are the exact decimals of the spec (`decimal_value`). A float x
    satisfies x >= e exactly when x >= float_at_least(e), and x <= max
    exactly when x <= float_at_most(max); so x is inside the envelope when
    low <= x <= high, and in bin k when exactly k interior keys are <= x
    (docs/semantics.md, "Cells"). The spec reader refuses edges that
    leave a bin with no float64, so the keys increase and every bin can
    be reached.
    """
    return reading_key(edges[0]), tuple(reading_key(e) for e in edges[1:-1]), float_at_most(decimal_value(edges[-1]))


def reading_key(edge: float | Fraction) -> float:
    """The float k such that a float reading x is at or above `edge` exactly when x >= k: the smallest float64 at
    or above the edge's exact value (a spec float's decimal, `decimal_value`; a Fraction as it is). The one
    comparison of a float reading with a bin edge or a box tree's threshold (`certfsm._box_tree`)."""
    return float_at_least(decimal_value(edge))


def reading_thresholds(edges: Sequence[float]) -> tuple[float, ...]:
    """`reading_keys` as one increasing sequence (low, interior..., the float just above high): a float x lies in
    bin k exactly when thresholds[k] <= x < thresholds[k + 1], and outside the envelope below the first or from
    the last on."""
    low, interior, high = reading_keys(edges)
    return (low, *interior, math.nextafter(high, math.inf))


def off_grid_edge(edges: Iterable[float], frac_bits: int) -> str | None:
    """Why the edges cannot be binned on the 2^-f grid (None when every edge is a multiple of 2^-f).

    A reading reaches the fixed-point path as an integer v meaning
    v * 2^-f, converted from a real value by whoever measures it. Only with
    every edge on the grid does rounding a real value down to the grid keep
    it in its cell, whichever converter does it, so the fixed-point path
    (`Machine.fixed_point`, the Verilog and the C) refuses other edges.
    """
    scale = 1 << frac_bits
    for k, edge in enumerate(edges):
        scaled = decimal_value(edge) * scale
        if scaled.denominator != 1:
            below, above = math.floor(scaled), math.ceil(scaled)
            return (
                f"edges[{k}]={edge!r} is not a multiple of 2^-{frac_bits} (the nearest are "
                f"{_grid_value(below, frac_bits)} and {_grid_value(above, frac_bits)}), so a reading rounded "
                "to the fixed-point grid could change cell; move the edge onto the grid or raise frac_bits"
            )
    return None


def _grid_value(integer: int, frac_bits: int) -> str:
    value = Fraction(integer, 1 << frac_bits)
    return repr(float(value)) if Fraction(float(value)) == value else str(value)


def integer_thresholds(edges: Iterable[float | Fraction], frac_bits: int) -> tuple[int, ...]:
    """ceil(e * 2^f) for every edge e, from the exact decimal of the edge.

    So an integer reading v (meaning v * 2^-f) satisfies v >= threshold
    exactly when v * 2^-f >= e: integer binning equals real binning
    (docs/semantics.md, "Fixed point").
    """
    scale = 1 << frac_bits
    return tuple(math.ceil(decimal_value(edge) * scale) for edge in edges)


def integer_envelope(edges: Sequence[float], frac_bits: int) -> tuple[int, int]:
    """(lo, hi) with v inside [min, max] exactly when lo <= v <= hi: ceil(min * 2^f), floor(max * 2^f)."""
    scale = 1 << frac_bits
    return math.ceil(decimal_value(edges[0]) * scale), math.floor(decimal_value(edges[-1]) * scale)


# ------------------------------------------------------------- the machine


@dataclass(frozen=True, eq=False)
class Machine:
    """A certified table inside its state machine, as the runtime, the replay and the export see it.

    Per input: `names`, `edges` (float bin edges; cells are products of
    half-open bins [lo, hi), the last bin closed, numbered in C order) and
    `frac_bits` (None: no fixed-point path). Per cell: `proposal` (output
    index), `exact` (proved for the whole cell, else conservative) and
    `allowed` (bitmask over output indices). `tokens` names the outputs;
    `params` drives `step`. Only the standard library is used.

    `refinement` (None: a flat table) holds the box trees of a refined
    table (docs/design.md, "Box trees"): a reading's proposal and allowed
    row then come from its leaf (`leaf_of`, `leaf_of_fixed`; `step_leaf`
    steps on one), and a refined cell's own entry holds the conservative
    token, status conservative, and the cell's mask, safe for a reader that
    ignores leaves. `step` reads cells: on a refined cell it sees that
    conservative entry. The runtime, the Verilog and the C read leaves
    (`certfsm.hdl_export` finds a reading's leaf in the clock that bins it).
    """

    names: tuple[str, ...]
    edges: tuple[tuple[float, ...], ...]
    frac_bits: tuple[int | None, ...]
    tokens: tuple[str, ...]
    proposal: tuple[int, ...]
    exact: tuple[bool, ...]
    allowed: tuple[int, ...]
    params: MachineParams
    artifact_sha256: str = ""
    refinement: Refinement | None = None

    def __repr__(self) -> str:
        """A summary a person can read (inputs, cells, tokens, the artifact's hash): the dataclass's own repr
        would print every table entry, tens of thousands of characters for the example."""
        shape = "x".join(map(str, self.shape))
        tokens = [f"{t} (conservative)" if k == self.params.conservative else t for k, t in enumerate(self.tokens)]
        sha = f"sha256 {self.artifact_sha256[:12]}..." if self.artifact_sha256 else "no artifact"
        return (
            f"Machine({self.n_inputs} inputs {_listed(self.names)}; {self.n_cells} cells ({shape}), "
            f"{sum(self.exact)} exact; {len(self.tokens)} tokens {_listed(tokens)}; {sha})"
        )

    @classmethod
    def from_artifact(cls, artifact: Artifact) -> Machine:
        """Decode a loaded (checked) `Artifact`: the one place an artifact becomes a machine."""
        spec = artifact.stored_spec
        params = MachineParams(
            n_tokens=artifact.n_outputs,
            conservative=artifact.conservative,
            confirm_cycles=artifact.confirm_cycles,
            cooldown_cycles=artifact.cooldown_cycles,
            overridable=frozenset(artifact.overridable),
            codes=tuple(artifact.codes),
            legal=frozenset(spec.legal),
        )
        return cls(
            names=spec.input_names,
            edges=tuple(tuple(float(e) for e in edges) for edges in artifact.edges),
            frac_bits=tuple(artifact.frac_bits),
            tokens=spec.outputs,
            proposal=tuple(int(p) for p in artifact.proposal.reshape(-1)),
            exact=tuple(bool(e) for e in artifact.exact.reshape(-1)),
            allowed=tuple(int(a) for a in artifact.allowed.reshape(-1)),
            params=params,
            artifact_sha256=artifact.sha256,
            refinement=artifact.refinement,
        )

    @property
    def n_inputs(self) -> int:
        return len(self.edges)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(e) - 1 for e in self.edges)

    @property
    def n_cells(self) -> int:
        return len(self.proposal)

    @functools.cached_property
    def strides(self) -> tuple[int, ...]:
        """Per input, how far one bin moves the flat cell index (C order: the last input varies fastest)."""
        return c_order_strides(self.shape)

    def cell_of(self, reading: Any) -> int:
        """The flat cell of one reading (one real value per input, in input order), or OUT_OF_ENVELOPE.

        NaN, inf, None (a missing value) and values outside [min, max] are
        out of envelope. Every number is placed exactly as the decimal edges
        say (docs/semantics.md, "Cells"): floats through `reading_keys`,
        every other real number (int of any size, Fraction, Decimal, numpy scalars,
        longdouble included) by exact comparison with the edges' rationals,
        never rounded to a float first. A reading of the wrong length or a
        value that is not a number (a bool, a string) is a clear error
        naming the input (TypeError, ValueError), never a silent fallback.
        A list or tuple of floats takes the fast path: this runs once per
        control cycle.
        """
        if type(reading) in (list, tuple) and len(reading) == self.n_inputs and set(map(type, reading)) == _FLOATS:
            values = reading
        else:
            values = self._checked(reading, "reading")
            if any(type(v) is not float for v in values):
                return self._cell_exactly(values)
        cell = 0
        for value, (low, high, interior, stride) in zip(values, self._bins):
            if not low <= value <= high:
                return OUT_OF_ENVELOPE
            cell += bisect.bisect_right(interior, value) * stride
        return cell

    @functools.cached_property
    def _bins(self) -> tuple[tuple[float, float, tuple[float, ...], int], ...]:
        """Per input: (low, high, interior keys, stride) of `reading_keys`, the one table `cell_of` walks."""
        return tuple(
            (low, high, interior, stride)
            for (low, interior, high), stride in zip(map(reading_keys, self.edges), self.strides)
        )

    @functools.cached_property
    def _exact_bins(self) -> tuple[tuple[Fraction, Fraction, tuple[Fraction, ...], int], ...]:
        """Per input: (min, max, interior edges, stride) as the edges' exact decimals."""
        return tuple(
            (decimal_value(e[0]), decimal_value(e[-1]), tuple(decimal_value(v) for v in e[1:-1]), stride)
            for e, stride in zip(self.edges, self.strides)
        )

    def _cell_exactly(self, values: tuple[Any, ...]) -> int:
        """`cell_of` for checked values that include exact rationals: every comparison in rational arithmetic."""
        cell = 0
        for value, (low, high, interior, stride) in zip(values, self._exact_bins):
            if value != value or value in (math.inf, -math.inf):
                return OUT_OF_ENVELOPE
            exact = Fraction(value)
            if not low <= exact <= high:
                return OUT_OF_ENVELOPE
            cell += bisect.bisect_right(interior, exact) * stride
        return cell

    def float_reading(self, reading: Iterable[Any]) -> tuple[float, ...]:
        """Floats that bin into the same cell (and leaf) as `reading`, input by input: what a log of float64 values
        keeps.

        A float (and a number a float holds exactly) stays as it is; any
        other number becomes its nearest float when that lies in the same
        bin (or on the same side of the envelope), else the float of its bin
        nearest to it, so that binning the logged floats gives back the cell
        the exact value was given. None and NaN stay NaN.
        """
        result = []
        for value, (low, high, interior, _), (exact_low, exact_high, exact_interior, _) in zip(
            self._checked(reading, "reading"), self._bins, self._exact_bins
        ):
            if type(value) is float:
                result.append(value)
                continue
            try:
                nearest = float(value)
            except OverflowError:
                nearest = math.inf if value > 0 else -math.inf
            if value < exact_low:
                result.append(nearest if nearest < low else math.nextafter(low, -math.inf))
            elif value > exact_high:
                result.append(nearest if nearest > high else math.nextafter(high, math.inf))
            else:
                k = bisect.bisect_right(exact_interior, value)
                keys = (low, *interior)
                top = interior[k] if k < len(interior) else math.nextafter(high, math.inf)
                result.append(min(max(nearest, keys[k]), math.nextafter(top, -math.inf)))
        return self._in_same_leaf(reading, tuple(result))

    def _in_same_leaf(self, reading: Iterable[Any], floats: tuple[float, ...]) -> tuple[float, ...]:
        """`floats` (in the cell of `reading`) moved, input by input, into the box of the leaf that holds
        `reading`, so that a refined table decides the logged floats as it decided the reading: the floats of a
        leaf's interval [low, high) run from `reading_key(low)` to the float below `reading_key(high)` (to
        `float_at_most(high)` on a closed side)."""
        if self.refinement is None:
            return floats
        values = self._checked(reading, "reading")
        cell = self.cell_of(values) if all(type(v) is float for v in values) else self._cell_exactly(values)
        tree = None if cell == OUT_OF_ENVELOPE else self.refinement.tree_of(cell)
        if tree is None:
            return floats
        box = tree.boxes[tree.leaf_index(values)]
        return tuple(
            min(
                max(value, reading_key(side.low)),
                float_at_most(side.high) if side.closed else math.nextafter(reading_key(side.high), -math.inf),
            )
            for value, side in zip(floats, box.intervals)
        )

    def _checked(self, reading: Iterable[Any], what: str, integers: bool = False) -> tuple[Any, ...]:
        """One value per input: floats or exact rationals (None, a missing probe value, and numbers that have no
        finite value become NaN) or, for the fixed-point path, integers. A wrong length or a value that is not a
        number is an error naming the input."""
        try:
            values = tuple(reading)
        except TypeError:
            raise TypeError(
                f"{what} {reading!r:.60} is not a sequence; give one value per input ({', '.join(self.names)})"
            ) from None
        if len(values) != self.n_inputs:
            raise ValueError(
                f"{what} has {len(values)} values but the machine has {self.n_inputs} inputs "
                f"({', '.join(self.names)}); give one value per input, in that order"
            )
        checked: list[float | Fraction | int] = []
        for name, value in zip(self.names, values):
            if value is None and not integers:
                checked.append(math.nan)
            elif isinstance(value, (bool, str, bytes)) or not isinstance(value, (numbers.Real, decimal.Decimal)):
                raise TypeError(f"{what}: input {name} = {value!r:.40} is not a number")
            elif integers:
                if not isinstance(value, numbers.Integral):
                    raise TypeError(
                        f"{what}: input {name} = {value!r:.40} is not an integer; the fixed-point path "
                        "takes integers v meaning v * 2^-frac_bits"
                    )
                checked.append(int(value))
            else:
                checked.append(exact_reading_value(name, value, what))
        return tuple(checked)

    @functools.cached_property
    def fixed_point(self) -> tuple[tuple[tuple[int, ...], int, int], ...]:
        """Per input: the interior integer thresholds and the integer envelope (lo, hi); SpecError without frac_bits."""
        tables = []
        for index, (name, edges, bits) in enumerate(zip(self.names, self.edges, self.frac_bits)):
            if bits is None:
                raise SpecError(
                    f"inputs[{index}] ({name}) has no frac_bits, so the machine has no fixed-point "
                    "path; add frac_bits (0..24) to that input in the spec"
                )
            problem = off_grid_edge(edges, bits)
            if problem:
                raise SpecError(f"inputs[{index}] ({name}): {problem}")
            tables.append((integer_thresholds(edges, bits)[1:-1], *integer_envelope(edges, bits)))
        return tuple(tables)

    def cell_of_fixed(self, values: Iterable[Any]) -> int:
        """`cell_of` for fixed-point integers (v means v * 2^-frac_bits), by integer compares only."""
        integers = self._checked(values, "fixed-point reading", integers=True)
        cell = 0
        for value, (interior, low, high), stride in zip(integers, self.fixed_point, self.strides):
            if not low <= value <= high:
                return OUT_OF_ENVELOPE
            cell += bisect.bisect_right(interior, value) * stride
        return cell

    def leaf_of(self, reading: Any) -> Leaf | None:
        """The leaf that holds one reading (None: out of envelope): the cell by `cell_of`, then its tree, compared
        with each threshold by the same rule (`certfsm._box_tree.BoxTree.leaf_index`). An unrefined cell is its
        own single leaf (`cell_leaf`)."""
        values = self._checked(reading, "reading")
        cell = self.cell_of(values) if all(type(v) is float for v in values) else self._cell_exactly(values)
        if cell == OUT_OF_ENVELOPE:
            return None
        tree = None if self.refinement is None else self.refinement.tree_of(cell)
        return self.cell_leaf(cell) if tree is None else tree.leaves[tree.leaf_index(values)]

    def leaf_of_fixed(self, values: Iterable[Any]) -> Leaf | None:
        """`leaf_of` for fixed-point integers (v means v * 2^-frac_bits), by integer compares only."""
        integers = self._checked(values, "fixed-point reading", integers=True)
        cell = self.cell_of_fixed(integers)
        if cell == OUT_OF_ENVELOPE:
            return None
        tree = None if self.refinement is None else self.refinement.tree_of(cell)
        return self.cell_leaf(cell) if tree is None else tree.leaves[tree.leaf_index_fixed(integers)]

    def cell_leaf(self, cell: int) -> Leaf:
        """The flat entry of `cell` as a leaf: exact or conservative (a flat table does not tell undecided apart)."""
        from ._box_tree import Leaf, LeafStatus

        status = LeafStatus.EXACT if self.exact[cell] else LeafStatus.CONSERVATIVE
        return Leaf(status, self.proposal[cell], self.allowed[cell])

    def leaf_row(self, leaf: Leaf) -> tuple[bool, ...]:
        """Which output indices may be emitted in `leaf`: the allowed row that `step` reads with its proposal."""
        return tuple(bool(leaf.allowed >> k & 1) for k in range(self.params.n_tokens))

    def allowed_row(self, cell: int) -> tuple[bool, ...]:
        """Which output indices may be emitted in `cell`."""
        mask = self.allowed[cell]
        return tuple(bool(mask >> k & 1) for k in range(self.params.n_tokens))

    @functools.cached_property
    def _rows(self) -> tuple[tuple[bool, ...], ...]:
        return tuple(self.allowed_row(cell) for cell in range(self.n_cells))

    def step(
        self, state: State, cell: int, sla_ok: bool = True, override: int | None = None
    ) -> tuple[State, int, Reason]:
        """One cycle of `step` on this machine's table: (next state, token index, reason)."""
        if cell == OUT_OF_ENVELOPE:
            return step(self.params, state, None, None, False, sla_ok, override)
        return step(self.params, state, self.proposal[cell], self._rows[cell], True, sla_ok, override)

    def step_leaf(
        self, state: State, leaf: Leaf | None, sla_ok: bool = True, override: int | None = None
    ) -> tuple[State, int, Reason]:
        """One cycle of `step` on a leaf (`leaf_of`; None out of the envelope): its token is the proposal and its
        allowed mask the row (docs/semantics.md, "State machine"). On a flat table, `leaf_of` then `step_leaf`
        equals `cell_of` then `step`."""
        if leaf is None:
            return step(self.params, state, None, None, False, sla_ok, override)
        return step(self.params, state, leaf.token, self.leaf_row(leaf), True, sla_ok, override)

    def initial_state(self) -> State:
        return initial_state(self.params)

    def cell_bounds(self, cell: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(lower, upper) corners of `cell`; upper equal to an input's max means that side is closed."""
        if not 0 <= cell < self.n_cells:
            raise ValueError(f"cell {cell} is outside 0..{self.n_cells - 1}; use an index from cell_of")
        bins = [cell // stride % count for stride, count in zip(self.strides, self.shape)]
        return (tuple(e[b] for e, b in zip(self.edges, bins)), tuple(e[b + 1] for e, b in zip(self.edges, bins)))

    def describe_cell(self, cell: int) -> str:
        """Human-readable bounds of a cell, e.g. ``temperature in [85, 95)``."""
        lower, upper = self.cell_bounds(cell)
        return ", ".join(
            f"{name} in [{lo:g}, {hi:g}{']' if hi == e[-1] else ')'}"
            for name, lo, hi, e in zip(self.names, lower, upper, self.edges)
        )


# ------------------------------------------------------------- legality rules against cells


_Exact = TypeVar("_Exact", float, Fraction)
"""Spec floats (compared as floats, which keeps the order of their decimals) or exact Fractions, never mixed."""


def bins_met(edges: Sequence[_Exact], low: _Exact, high: _Exact) -> range:
    """The bins of one input (edges e0 < ... < en) that the closed interval [low, high] meets.

    Bin k is [e_k, e_k+1), the last bin closed, so [low, high] meets it
    exactly when ``low < e_k+1`` (``low <= e_n`` on the last bin) and
    ``high >= e_k``: an interval starting at 85 does not touch [80, 85).
    The bins met are consecutive, so a range.
    """
    n = len(edges) - 1
    met = [k for k in range(n) if (low < edges[k + 1] or (k == n - 1 and low <= edges[k + 1])) and high >= edges[k]]
    return range(met[0], met[-1] + 1) if met else range(0)


def cell_allowed_masks(
    edges: Sequence[Sequence[_Exact]],
    legal_mask: int,
    rules: Iterable[tuple[Sequence[_Exact], Sequence[_Exact], int]],
) -> tuple[int, ...]:
    """Per cell (flat, C order) the bitmask of output indices that may be emitted there, from the legality rules.

    `edges` holds one edge sequence per input; `rules` yields
    ``(lower, upper, forbidden_mask)``: a closed box (one bound per input)
    inside which the tokens of `forbidden_mask` are forbidden; floats (spec
    decimals, compared as floats, which keeps their order) or exact
    Fractions throughout (a box tree's leaf, `certfsm._box_tree.leaf_allowed_mask`).
    A token is
    allowed in a cell when it is in `legal_mask` and no rule whose box
    meets the cell (`bins_met` in every input) forbids it. This is the
    one standard-library statement of docs/semantics.md, "Legality rules"; the
    artifact loader re-derives the table's masks with it, and
    `certfsm.fsm._table.allowed_masks` (vectorised) is tested equal to it.
    """
    shape = [len(e) - 1 for e in edges]
    strides, stride = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i], stride = stride, stride * shape[i]
    masks = [legal_mask] * stride
    for lower, upper, forbidden in rules:
        keep = ~forbidden
        met = [[k * s for k in bins_met(e, lo, hi)] for e, lo, hi, s in zip(edges, lower, upper, strides)]
        for offsets in itertools.product(*met):
            cell = sum(offsets)
            masks[cell] &= keep
    return tuple(masks)
