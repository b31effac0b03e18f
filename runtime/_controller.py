"""The embedded controller: a certified machine, its current state, one decision per cycle.

Why a class around `certfsm.machine`: the machine is pure (state in,
state out); a deployment needs the state kept between cycles, the SLA
monitor's verdict fed in, operator overrides held for a number of cycles,
hot swaps between two cycles, and all of that safe to call from several
threads. Every decision is `Machine.step`, the step function the machine
proofs cover; nothing here restates a rule. The controller asks it
through its tested twins (`certfsm.fast_binning` bins a reading in one
straight line of bisections, `_step_table` remembers
`Machine.step` per state and input class), because a control cycle is
budgeted in microseconds and the plain functions are written to be read.

`step` never raises for values: NaN, inf, a missing value (None) and
readings outside the envelope are the envelope fallback (conservative
token, FALLBACK_ENVELOPE). A malformed reading (wrong length, not a
number, an unknown input name in a mapping) is a TypeError or ValueError
naming the input, raised before anything changes.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Hashable, Iterable, Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Callable, Final, Mapping, NamedTuple, Protocol, cast

from certfsm import ArtifactError, SpecError
from certfsm.fast_binning import (
    CellOf,
    LeafBinning,
    LeafWalk,
    RowBinning,
    compile_cell_of,
    compile_cell_of_fixed,
)
from certfsm.machine import NO_CANDIDATE, OUT_OF_ENVELOPE, Machine, Reason, State
from ._input_warnings import warn_once
from ._step_table import REFINED_CELL, StepTable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from certfsm import Leaf

    from certfsm.sla import SlaMonitor, SpecWithSla

    from ._audit import AuditWriter
    from ._observe import RuntimeCounters


class _Queued(enum.Enum):
    QUEUED = enum.auto()


_QUEUED: Final = _Queued.QUEUED  # take the override from the operator's queue (`Controller.override`)
_new_tuple = tuple.__new__  # builds a Decision without NamedTuple.__new__'s Python-level call


Reading = Iterable[object]
"""One cycle's reading: a real value per input in input order (None: missing), or a mapping by input name."""
Metrics = Mapping[str, float | None]
"""One cycle's SLA metrics by name (None: not measured)."""
Verdict = Callable[[Metrics | None, str], bool]
"""`sla_ok` of a cycle from its metrics and the token they were measured on (`_verdict_of`)."""


class SlaStatusLike(Protocol):
    @property
    def ok(self) -> bool: ...


class SlaSource(Protocol):
    """What the controller needs of an SLA monitor (`certfsm.sla.SlaMonitor` has it; its lean `update_ok`,
    optional here, is used when present)."""

    def update(self, metrics: Metrics, token: str) -> SlaStatusLike: ...


class _FixedReading(tuple[object, ...]):
    """The last reading, when it was fixed-point integers: a swap re-bins it by the new machine's integer path."""

    __slots__ = ()


class _Compiled(NamedTuple):
    """A machine with its twins, swapped as one value so a cycle never mixes two machines' grids and tables."""

    machine: Machine
    cell_of: CellOf
    cell_of_fixed: CellOf
    table: StepTable

    @classmethod
    def of(cls, machine: Machine) -> "_Compiled":
        return cls(machine, compile_cell_of(machine), compile_cell_of_fixed(machine), StepTable(machine))


# The fields in NamedTuple's call form: mypy refuses a field named `index` (tuple.index) in the class form.
_DecisionFields = NamedTuple(
    "_DecisionFields",
    [
        ("token", str),
        ("index", int),
        ("code", int),
        ("reason", Reason),
        ("cell", int),
        ("state", State),
        ("sla_ok", bool),
        ("time", float | None),
    ],
)
_DecisionFields.__new__.__defaults__ = (None,)  # time


class Decision(_DecisionFields):
    """One cycle's outcome: the token (name, output index, 4-bit code), why, where, and the state after.

    `cell` is the grid cell of the reading (OUT_OF_ENVELOPE outside), also
    on a refined table, whose leaf within the cell decided: the leaf is a
    function of the reading, which the audit log keeps (docs/semantics.md,
    "State machine").

    A named tuple rather than a frozen dataclass: one is built per control
    cycle, and a named tuple costs a fifth of the time to build (the
    controller calls `tuple.__new__` directly, skipping the named tuple's
    Python-level `__new__`, which costs as much again as the tuple).
    """

    __slots__ = ()

    @property
    def in_envelope(self) -> bool:
        return self.cell != OUT_OF_ENVELOPE

    def __repr__(self) -> str:
        """The fields a person reads, the reason by name, the cell as -1 out of the envelope; equality and
        unpacking are the tuple's, untouched."""
        state = self.state
        at = "" if self.time is None else f", time={self.time!r}"
        return (
            f"Decision(token={self.token!r}, code={self.code}, reason={self.reason!s}, cell={self.cell}, "
            f"sla_ok={self.sla_ok}, state=(current {state.current}, candidate {state.candidate}, "
            f"count {state.count}, cooldown {state.cooldown}){at})"
        )


Recorder = Callable[[Decision, Reading, "Metrics | None", "int | None"], object]
"""`record(decision, reading, metrics, override)`: told of every decision, under the controller's lock."""


class Controller:
    """A certified machine running: `step` one reading per cycle, `decide_many` for batches.

    `sla` is an optional monitor with ``update(metrics, token) -> status``
    (``status.ok``; its ``update_ok(metrics, token) -> bool`` is called
    instead when it has one, as `certfsm.sla.SlaMonitor` does), `record` an optional callable that receives every
    `Decision` with its inputs. `audit` is an optional
    `runtime._audit.AuditWriter`: every step (its reading as given, real
    or fixed point), swap, refused swap and override request is appended
    to it (a step without `now` is stamped with `clock()`).
    All are called under the controller's lock, so decisions and records
    keep one order. `counters` is an optional
    `runtime._observe.RuntimeCounters`: every decision (with its latency),
    swap, refused swap and override request is counted, under the same lock.
    """

    def __init__(
        self,
        machine: Machine,
        *,
        sla: SlaSource | None = None,
        record: Recorder | None = None,
        audit: AuditWriter | None = None,
        clock: Callable[[], float] = time.time,
        counters: RuntimeCounters | None = None,
    ) -> None:
        self._compiled = _Compiled.of(machine)
        self._counters = counters
        self._audit = audit
        self._clock = clock
        self._sla = sla
        self._sla_ok = None if sla is None else _verdict_of(sla)
        self._record = record
        self._override: int | None = None
        self._override_cycles: int | None = None
        # the last cycle's reading (a `_FixedReading` for step_fixed); None before any
        self._last_reading: Reading | None = None
        self._lock = threading.Lock()
        self._batch: tuple[_Compiled, npt.NDArray[np.int64], RowBinning, LeafBinning | None] | None = (
            None  # decide_many's, made on first use
        )
        self._told: set[Hashable] = set()  # the causes of RuntimeInputWarning already told (`warn_once`)
        if getattr(sla, "on_missing", False) is None:  # a `certfsm.sla.SlaMonitor` no one listens to yet
            setattr(sla, "on_missing", self._tell_missing_metric)
        self._enter(machine.initial_state())

    def _enter(self, state: State) -> None:
        """Make `state` the current state, with its row of the step table and its token's name."""
        self._state = state
        self._node = self._compiled.table.node(state)
        self._token_name = self._compiled.machine.tokens[state.current]
        self._bind_step()

    @property
    def machine(self) -> Machine:
        return self._compiled.machine

    def __repr__(self) -> str:
        """The artifact, the current token and state, the SLA monitor and what observes the cycles, in a line."""
        machine, state = self._compiled.machine, self._state
        sla = repr(self._sla) if self._sla is not None else "no SLA monitor"
        if len(sla) > 80:
            sla = type(self._sla).__name__
        observers = [
            what
            for what, attached in (("recorder", self._record), ("audit log", self._audit), ("counters", self._counters))
            if attached is not None
        ]
        return (
            f"Controller(sha256 {machine.artifact_sha256[:12]}..., {machine.n_inputs} inputs, {machine.n_cells} "
            f"cells; token {self._token_name}, candidate {state.candidate}, count {state.count}, cooldown "
            f"{state.cooldown}; {sla}{'; ' + ', '.join(observers) if observers else ''})"
        )

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics the SLA monitor reads (what an audit log must keep for a replay)."""
        paths = getattr(self._sla, "paths", ())
        return tuple(dict.fromkeys(path.metric for path in paths))

    def attach_audit(self, writer: AuditWriter) -> None:
        """Append every later step, swap and override request to `writer` (an `AuditWriter`)."""
        with self._lock:
            self._audit = writer
            self._bind_step()

    def attach_counters(self, counters: RuntimeCounters) -> None:
        """Count every later decision, swap and override request in `counters` (a `RuntimeCounters`)."""
        with self._lock:
            self._counters = counters
            self._bind_step()

    @property
    def counters(self) -> RuntimeCounters | None:
        """The attached `RuntimeCounters`, or None."""
        return self._counters

    @property
    def state(self) -> State:
        return self._state

    def reading_of(self, values: Reading) -> Sequence[object]:
        """A reading in input order, from a sequence or from a mapping by input name (every input named)."""
        if type(values) is list or type(values) is tuple:  # `type() in (list, tuple)`, spelled so that mypy narrows
            return values
        machine = self._compiled.machine
        if isinstance(values, Mapping):
            unknown = sorted(set(values) - set(machine.names))
            if unknown:
                raise ValueError(
                    f"reading names unknown input {unknown[0]!r}; the inputs are {', '.join(machine.names)}"
                )
            if len(values) < machine.n_inputs:  # unknown names were refused: some input is not named
                self._tell_missing_inputs(values)
            return tuple(values.get(name) for name in machine.names)
        return tuple(values)

    def _tell_missing_inputs(self, values: Mapping[object, object]) -> None:
        """Warn once per input that a mapping reading leaves out (`RuntimeInputWarning`)."""
        machine = self._compiled.machine
        untold = [name for name in machine.names if name not in values and ("input", name) not in self._told]
        if untold:
            warn_once(
                self._told,
                [("input", name) for name in untold],
                f"reading has no value for input{'s' * (len(untold) > 1)} {', '.join(map(repr, untold))} (the mapping names {len(values)} "
                f"of the {machine.n_inputs} inputs: {', '.join(machine.names)}): a missing value is out of the "
                'envelope (docs/semantics.md, "Cells"), so every such cycle falls back to the conservative token '
                f"{machine.tokens[machine.params.conservative]} (FALLBACK_ENVELOPE); name every input in the "
                "mapping, with None for a value not measured (which falls back without this warning)",
            )

    def _tell_missing_metric(self, metric: str, path: str) -> None:
        """Warn once per SLA path whose metric a cycle's metrics leave out (`SlaMonitor.on_missing`)."""
        if ("metric", path) in self._told:
            return
        machine = self._compiled.machine
        limits = next(
            (
                f" (more than {p.max_violations} in {p.window} cycles)"
                for p in getattr(self._sla, "paths", ())
                if getattr(p, "name", None) == path
            ),
            "",
        )
        warn_once(
            self._told,
            [("metric", path)],
            f"SLA metric {metric!r} of path {path!r} is missing from metrics= (step was called without "
            f"metrics=, or with a mapping that lacks it): a missing metric is a violation "
            f'(docs/semantics.md, "SLA paths"), and once the violations exceed the path\'s limit{limits} every '
            f"cycle falls back to the conservative token {machine.tokens[machine.params.conservative]} "
            f"(FALLBACK_SLA); pass metrics={{{metric!r}: ...}} to step every cycle (None for a cycle it was "
            "not measured, which is a violation without this warning)",
        )

    def step(self, reading: Reading, metrics: Metrics | None = None, now: float | None = None) -> Decision:
        """Decide one cycle from real-valued readings: `reading` a sequence in input order or a mapping by input
        name (None: a value not measured), `metrics` the cycle's SLA metrics by name, `now` its time (seconds; the
        audit log stamps `clock()` when None).

        Never raises for values: NaN, inf, None and readings outside the
        envelope give the conservative token (FALLBACK_ENVELOPE); a missing
        SLA metric is a violation (FALLBACK_SLA once the path is breached).
        A mapping that leaves out an input, or metrics that leave out a
        metric an SLA path reads, is told once as a `RuntimeInputWarning`.
        A malformed reading (wrong length, not a number, an unknown input
        name) is a TypeError or ValueError naming the input, raised before
        anything changes.

        Each controller answers this with its own fast function (`quick_step`
        for the machine in force, or `_step_observed` while observers are
        attached; `_bind_step`), which shadows this method on the instance;
        calling the method on the class runs that same function.
        """
        step: Callable[..., Decision] = object.__getattribute__(self, "step")  # the instance's, not this method
        return step(reading, metrics, now)

    def _step_observed(self, reading: Reading, metrics: Metrics | None = None, now: float | None = None) -> Decision:
        """`step` while observers are attached: every cycle through `_cycle`, which tells them."""
        return self._cycle(reading, False, metrics, now, _QUEUED)

    def step_fixed(self, values: Reading, metrics: Metrics | None = None, now: float | None = None) -> Decision:
        """Decide one cycle from fixed-point integers (v means v * 2^-frac_bits), as the hardware does."""
        return self._cycle(values, True, metrics, now, _QUEUED)

    def replay_step(
        self, reading: Reading, metrics: Metrics | None, now: float | None, override: int | None, fixed: bool = False
    ) -> Decision:
        """One cycle with the override given as logged (an output index or None), for `replay`; `fixed` bins the
        reading as fixed-point integers, as `step_fixed` did."""
        return self._cycle(reading, fixed, metrics, now, override)

    def _cycle(
        self,
        reading: Reading,
        fixed: bool,
        metrics: Metrics | None,
        now: float | None,
        logged_override: int | None | _Queued,
    ) -> Decision:
        """One cycle, every case: fixed point, readings off the compiled binning, a queued or logged override,
        observers, a hot swap between binning and lock.

        The reading is binned before the lock (a malformed one raises
        before anything changes); under the lock a hot swap since then is
        noticed and the reading binned again with the machine in force, so
        one grid's cell never meets another's table.
        """
        started = perf_counter_ns() if self._observed else 0
        compiled = self._compiled
        cell = compiled.cell_of_fixed(reading) if fixed else compiled.cell_of(reading)
        off_fast_path = cell is None  # not a list or tuple of floats (or of ints, fixed point)
        if cell is None:
            reading, cell = self._cell(compiled, reading, fixed)
        lock = self._lock
        lock.acquire()  # acquire/release: a `with` block costs twice as much here, every cycle
        try:
            swapped = self._compiled is not compiled
            if swapped:
                compiled = self._compiled
                reading, cell = self._cell(compiled, reading, fixed)
            sla_ok = True if self._sla_ok is None else self._sla_ok(metrics, self._token_name)
            if logged_override is _QUEUED:
                override = None if self._override is None else self._take_override()
            else:
                override = logged_override
            table = compiled.table
            mode = 1 if sla_ok and override is None else table.mode(sla_ok, override)
            cell_class = table.cell_class[cell]
            if cell_class == REFINED_CELL:
                cell_class = _leaf_class(compiled, reading, cell, fixed, off_fast_path or swapped)
            found = self._node[mode][cell_class]
            if found is None:
                found = table.transition(self._state, self._node, mode, cell_class, sla_ok, override)
            name, index, code, reason, state, self._node = found
            # The reading kept for a swap is a copy: a caller may refill its list for the next cycle.
            last = _FixedReading(reading) if fixed else reading if type(reading) is tuple else tuple(reading)
            self._state, self._token_name, self._last_reading = state, name, last
            decision = _new_tuple(Decision, (name, index, code, reason, cell, state, sla_ok, now))
            if self._observed:
                self._observe(decision, reading, metrics, override, started, fixed, off_fast_path)
            return decision
        finally:
            lock.release()

    def _bind_step(self) -> None:
        """Make `self.step` this controller's `quick_step` for the machine in force, or `_step_observed` while
        observers are attached (their cycles take `_cycle` anyway), and note which in `_observed`. Called whenever
        the machine or the observers change, under the lock or before any step.

        The function is an attribute of the instance that shadows the
        documented method `Controller.step`, so `ctl.step(...)` calls the
        closure directly with no method in between.
        """
        # Whether a cycle has anyone to tell (recorder, audit log, counters): one test per cycle instead of three.
        self._observed = self._record is not None or self._audit is not None or self._counters is not None
        # setattr: `self.step = ...` reads to mypy as assigning a method; `self.__dict__[...]` would turn the
        # instance's inline attribute values into a dict, and every attribute the cycle reads would get slower.
        setattr(self, "step", self._step_observed if self._observed else quick_step(self, self._compiled))

    def _cell(self, compiled: _Compiled, reading: Reading, fixed: bool) -> tuple[Sequence[object], int]:
        """(reading in input order, cell) through the plain binning: readings off the compiled fast path."""
        values = self.reading_of(reading)
        return values, (compiled.machine.cell_of_fixed(values) if fixed else compiled.machine.cell_of(values))

    def _observe(
        self,
        decision: Decision,
        reading: Reading,
        metrics: Metrics | None,
        override: int | None,
        started: int,
        fixed: bool,
        off_fast_path: bool,
    ) -> None:
        """Hand a decision to the recorder, the audit log and the counters that are attached (under the lock).

        The audit log gets the reading as given: real values, or the integers of a fixed-point cycle in a record
        of their own kind, so a replay bins each by the path it took."""
        if self._record is not None:
            self._record(decision, reading, metrics, override)
        _, index, code, reason, cell, state, sla_ok, now = decision
        if self._audit is not None:
            append = self._audit.append_step_fixed if fixed else self._audit.append_step
            if off_fast_path and not fixed:  # a reading of other numbers: log floats that bin into the same cell
                reading = self._compiled.machine.float_reading(reading)
            append(
                self._clock() if now is None else now,
                reading,
                metrics or {},
                cell,
                index,
                code,
                reason,
                state,
                sla_ok,
                override,
            )
        if self._counters is not None:
            self._counters.count_step(index, reason, sla_ok, perf_counter_ns() - started)

    def _take_override(self) -> int | None:
        if self._override is None:
            return None
        override = self._override
        if self._override_cycles is not None:
            self._override_cycles -= 1
            if self._override_cycles <= 0:
                self._override = self._override_cycles = None
        return override

    def override(self, token: str | None, cycles: int | None = None) -> None:
        """Ask for `token` (None clears) for `cycles` cycles (None: until cleared).

        Only the spec's overridable tokens can be asked for; the step
        function still lets fallback and legality pre-emption win, and
        reports a refusal in the reason.
        """
        with self._lock:
            if self._counters is not None:
                self._counters.count_override_request()
            if token is None:
                self._override = self._override_cycles = None
                if self._audit is not None:
                    self._audit.append_override(self._clock(), None, None)
                return
            machine = self._compiled.machine
            if token not in machine.tokens:
                raise ValueError(
                    f"override token {token!r} is not a token of this controller; the tokens are "
                    f"{', '.join(machine.tokens)}"
                )
            index = machine.tokens.index(token)
            if index not in machine.params.overridable:
                names = [machine.tokens[k] for k in sorted(machine.params.overridable)]
                raise ValueError(
                    f"override token {token!r} is not overridable; the spec allows {', '.join(names) or 'none'}"
                )
            if cycles is not None and (not isinstance(cycles, int) or cycles < 1):
                raise ValueError(f"override cycles={cycles!r} is not a positive number of cycles; give e.g. 10 or None")
            self._override, self._override_cycles = index, cycles
            if self._audit is not None:
                self._audit.append_override(self._clock(), index, cycles)

    def swap(self, machine: Machine, *, source: str | None = None) -> tuple[str, str]:
        """Replace the machine between two cycles, atomically; returns (old, new) artifact hashes.

        The new machine may have another grid (other edges, more or fewer
        cells, flat or refined) but must have the same layout: inputs
        (names and frac_bits), tokens and codes, and a fixed-point path
        when the running one has one. The last reading is binned again by
        the new machine (a cell index never passes from one grid to
        another), and the current token is kept only where the new table
        allows it in that reading's leaf (its cell, on a flat table);
        otherwise (or before any reading) the state restarts at
        the conservative token. The candidate being confirmed is dropped,
        and the cooldown keeps running (capped at the new machine's
        `cooldown_cycles`).

        A machine of another layout is refused with ArtifactError naming
        `source` (the file it came from, when given) and what differs;
        the refusal is counted and logged like `refuse_swap`, and the
        machine in force goes on.
        """
        compiled = _Compiled.of(machine)  # outside the lock: compiling takes a moment
        with self._lock:
            old = self._compiled.machine
            problem = _layout_problem(old, machine)
            if problem:
                error = ArtifactError(f"{source or 'artifact ' + machine.artifact_sha256[:12]}: {problem}")
                self._note_refusal(str(error), machine.artifact_sha256 or None)
                raise error
            current = self._state.current
            leaf = _leaf_again(machine, self._last_reading)
            if leaf is None or not leaf.allowed >> current & 1:
                current = machine.params.conservative
            state = State(current, NO_CANDIDATE, 0, min(self._state.cooldown, machine.params.cooldown_cycles))
            if self._audit is not None:  # first: a swap the log cannot hold does not happen
                self._audit.append_swap(self._clock(), old.artifact_sha256, machine.artifact_sha256, state)
            self._compiled = compiled
            self._enter(state)
            if self._counters is not None:
                self._counters.count_swap()
            return old.artifact_sha256, machine.artifact_sha256

    def refuse_swap(self, reason: str, refused_sha256: str | None = None) -> None:
        """Note a swap that will not happen (say, the new artifact did not load): counted as a refused reload and
        appended to the audit log. `reason` names the file and why; the machine in force goes on."""
        with self._lock:
            self._note_refusal(reason, refused_sha256)

    def _note_refusal(self, reason: str, refused_sha256: str | None) -> None:
        """Count and log a refused swap (under the lock)."""
        if self._counters is not None:
            self._counters.count_refused_reload()
        if self._audit is not None:
            self._audit.append_refusal(self._clock(), reason, refused_sha256)

    def decide_many(self, readings: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Table decisions for a batch of readings (rows in input order): no state, no SLA, no override.

        Each row gets its leaf's proposal (its cell's, where the cell is
        not refined), or the conservative token out of
        the envelope (NaN, inf, outside [min, max]). Returns output
        indices (numpy int64). Vectorised with numpy for rows of float64
        (and of the numbers float64 holds exactly); any other number is
        placed exactly, row by row, by `Machine.cell_of`, which also refuses
        what `step` refuses (a bool, a string), naming the input.
        """
        import numpy as np

        machine = self._compiled.machine
        rows = _batch_rows(readings, machine)
        if rows.dtype != np.float64:
            conservative = machine.params.conservative
            leaves = [machine.leaf_of(list(row)) for row in rows]
            return np.array([conservative if leaf is None else leaf.token for leaf in leaves], dtype=np.int64).reshape(
                -1
            )
        lookup, binning, leaf_binning = self._batch_tables()
        cells = binning.cells(rows)
        tokens = lookup.take(cells)
        return tokens if leaf_binning is None else leaf_binning.apply(rows, cells, tokens)

    def _batch_tables(self) -> tuple[npt.NDArray[np.int64], RowBinning, LeafBinning | None]:
        """The proposals with the conservative token appended at index -1 (OUT_OF_ENVELOPE), the vectorised
        binning (`certfsm.fast_binning.RowBinning`) and, for a refined table, the vectorised walk to the leaves
        of refined cells (`LeafBinning`); made once per machine."""
        import numpy as np

        compiled = self._compiled
        cached = self._batch
        if cached is None or cached[0] is not compiled:
            machine = compiled.machine
            lookup = np.array([*machine.proposal, machine.params.conservative], dtype=np.int64)
            refinement = machine.refinement
            leaves = (
                None
                if refinement is None
                else LeafBinning(machine, lambda cell, leaf: refinement.tree_of(cell).leaves[leaf].token)  # type: ignore[union-attr]
            )
            cached = self._batch = (compiled, lookup, RowBinning(machine.edges, machine.shape), leaves)
        return cached[1], cached[2], cached[3]


def _batch_rows(readings: npt.ArrayLike, machine: Machine) -> npt.NDArray[Any]:
    """`readings` as a (rows, inputs) float64 array where float64 holds every value exactly, else as an object
    array for the exact row-by-row path; a bool or a string anywhere is refused as `Machine.cell_of` refuses it."""
    import numpy as np

    rows = readings if isinstance(readings, np.ndarray) else np.asarray(readings, dtype=object)
    if rows.ndim != 2 or rows.shape[1] != machine.n_inputs:
        raise ValueError(
            f"readings have shape {rows.shape}; give rows of {machine.n_inputs} values ({', '.join(machine.names)})"
        )
    kind = rows.dtype.kind
    if kind == "f" and rows.dtype.itemsize <= 8:
        return rows.astype(np.float64, copy=False)
    if kind in "iu":
        small = rows.size == 0 or int(np.abs(rows).max()) <= 2**53
        return rows.astype(np.float64) if small else rows.astype(object)
    if kind in "fO":
        values = rows.astype(object)
        types = set(map(type, values.ravel()))
        if types <= _EXACT_IN_FLOAT64 and all(abs(v) <= 2**53 for v in values.ravel() if type(v) is int):
            return values.astype(np.float64)
        return values
    raise TypeError(
        f"readings of dtype {rows.dtype} are not numbers; give rows of {machine.n_inputs} real values "
        f"({', '.join(machine.names)})"
    )


_EXACT_IN_FLOAT64 = {float, int}
"""Python types whose values float64 holds exactly (ints up to 2^53, checked apart); numpy's float64 is a float."""


def quick_step(controller: Controller, compiled: _Compiled) -> Callable[..., Decision]:
    """`controller.step` for its common cycle, as a closure over what stays fixed while `compiled` is in force.

    Why: a control cycle costs about a microsecond in CPython, and a tenth
    of that went to looking up the same attributes every cycle (the
    binning, the class of a cell, the lock's methods, the SLA verdict).
    Here they are the closure's own variables. The cycle it takes is the
    common one: a reading the compiled binning decides (a list or tuple of
    floats), no override queued, no observer attached, the machine it was
    made for still in force (all checked under the lock, so a caller that
    kept `controller.step` from before a swap or an attached audit log
    still has every cycle decided by the machine in force and logged).
    Anything else goes to `Controller._cycle` before the cycle has changed
    anything, so the closure only ever does what `_cycle` does with
    `override` None; tests/runtime/test_quick_step.py runs both side by
    side over random runs with overrides, swaps, SLA breaches and odd
    readings and compares every decision and state.
    """
    cell_of, table = compiled.cell_of, compiled.table
    cell_class, node_of_miss = table.cell_class, table.transition
    # A list by cell rather than the table's dict: on a table with every cell refined, reading the walk from a
    # dict of thousands of entries cost a tenth of a cycle more (bench/runtime.py's stress case).
    # None where a cell is not refined (its class is never REFINED_CELL, so its walk is never called).
    walks = cast(list[LeafWalk], [table.walks.get(cell) for cell in range(len(cell_class))] if table.walks else [])
    lock = controller._lock
    acquire, release = lock.acquire, lock.release
    verdict = controller._sla_ok
    cycle = controller._cycle

    def step(reading: Reading, metrics: Metrics | None = None, now: float | None = None) -> Decision:
        """Decide one cycle from real-valued readings (a sequence in input order, or a mapping by name)."""
        cell = cell_of(reading)
        if cell is None:
            return cycle(reading, False, metrics, now, _QUEUED)
        acquire()
        if controller._compiled is not compiled or controller._override is not None or controller._observed:
            release()  # before anything changed; _cycle takes the lock itself
            return cycle(reading, False, metrics, now, _QUEUED)
        try:
            sla_ok = True if verdict is None else verdict(metrics, controller._token_name)
            mode = 1 if sla_ok else 0
            node = controller._node
            klass = cell_class[cell]
            if klass < 0:  # REFINED_CELL: the class of its leaf (a list or tuple of floats: the binning took it)
                klass = walks[cell](reading)  # type: ignore[arg-type]
            found = node[mode][klass]
            if found is None:
                found = node_of_miss(controller._state, node, mode, klass, sla_ok, None)
            name, index, code, reason, state, controller._node = found
            controller._state, controller._token_name, controller._last_reading = state, name, reading
            return _new_tuple(Decision, (name, index, code, reason, cell, state, sla_ok, now))
        finally:
            release()

    return step


def _layout_problem(old: Machine, new: Machine) -> str:
    """What makes `new` unfit to replace `old` in a hot swap ('' when nothing): the reading and the decision
    mean the same on both sides of a swap, so inputs, fixed-point scaling, tokens and codes must agree."""
    running = f"the running artifact {old.artifact_sha256[:12]}"
    fix = "a hot swap keeps the layout; distil the new artifact from a spec with the same inputs and outputs"
    if new.names != old.names:
        return f"inputs ({', '.join(new.names)}) differ from those of {running} ({', '.join(old.names)}); {fix}"
    if new.frac_bits != old.frac_bits:
        return (
            f"inputs' frac_bits {list(new.frac_bits)} differ from those of {running} {list(old.frac_bits)} "
            f"(a fixed-point integer would change meaning); {fix}"
        )
    if new.tokens != old.tokens:
        return f"tokens ({', '.join(new.tokens)}) differ from those of {running} ({', '.join(old.tokens)}); {fix}"
    if new.params.codes != old.params.codes:
        return f"token codes {list(new.params.codes)} differ from those of {running} {list(old.params.codes)}; {fix}"
    lost = _fixed_point_problem(new)
    if lost and not _fixed_point_problem(old):
        return f"has no fixed-point path, which {running} has ({lost}); {fix}"
    return ""


def _fixed_point_problem(machine: Machine) -> str:
    """Why `machine` has no fixed-point path ('' when it has one)."""
    try:
        machine.fixed_point
    except SpecError as error:
        return str(error)
    return ""


def _leaf_again(machine: Machine, reading: Reading | None) -> Leaf | None:
    """The leaf of the last reading in `machine`'s table (its cell's own leaf where the cell is not refined);
    None before any reading, out of the envelope, or for a reading the caller has since refilled with something
    that is not a number."""
    if reading is None:
        return None
    try:
        return machine.leaf_of_fixed(reading) if type(reading) is _FixedReading else machine.leaf_of(reading)
    except (TypeError, ValueError):
        return None


def _leaf_class(compiled: _Compiled, reading: Any, cell: int, fixed: bool, exact: bool) -> int:
    """The step table's class of the leaf that holds `reading` in the refined `cell`: by the compiled walk for a
    reading the compiled binning took (a list or tuple of floats, or of ints with `fixed`), else (`exact`) by
    `Machine.leaf_of`, which places every other number exactly as `Machine.cell_of` does."""
    table, machine = compiled.table, compiled.machine
    if not exact:
        return (table.walks_fixed if fixed else table.walks)[cell](reading)
    return table.class_of_leaf(machine.leaf_of_fixed(reading) if fixed else machine.leaf_of(reading))


def _verdict_of(sla: SlaSource) -> Verdict:
    """`sla_ok` of a cycle from a monitor: its lean `update_ok` when it has one, else `update(...).ok`."""
    lean: Verdict | None = getattr(sla, "update_ok", None)
    if lean is not None:
        return lean
    return lambda metrics, token: bool(sla.update(metrics or {}, token).ok)


def spec_sla_monitor(spec: SpecWithSla) -> SlaMonitor | None:
    """A fresh monitor of the SLA paths of an artifact's spec (`Artifact.stored_spec`); None when it has none."""
    from certfsm.sla import SlaMonitor

    monitor = SlaMonitor.from_spec(spec)
    return monitor if monitor.paths else None
