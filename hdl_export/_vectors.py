"""Test vectors for the generated module: stimulus per clock edge and the outputs the Python reference expects.

The expected side restates nothing: each reading is binned by
`Machine.cell_of_fixed`, its leaf found by `Machine.leaf_of_fixed` (a
flat cell is its own leaf) and stepped by `Machine.step_leaf`, exactly as
the runtime's `step_fixed` does; this module only adds the port contract's
clocking (`_hardware.py`: reset, in_valid, the two-edge pipeline, outputs
that hold while no decision arrives) and turns ports into bits.

What is driven (`stimulus`), in order:

1. every cell at its lower corner and at its upper corner (each input
   just below its upper threshold, or at the envelope's top), and in a
   refined table every leaf the same way, so that each split's threshold
   is met at the threshold and one LSB below it (the corners of the
   leaves on either side), and once more one LSB above;
2. the envelope's edges: each input at its lowest and highest in-envelope
   value, one beyond each (where the bus can hold it) and the bus's own
   extremes, the others inside;
3. every reachable state (breadth first from reset over the machine's
   input classes) crossed with every input class: each cell class (one
   cell or leaf per distinct proposal and allowed mask) and out of envelope, with
   sla_ok 0 and 1, and no override, an override of every token and one of
   a code that is no token's; from each state every untried input in
   turn, and from reset along the shortest path to the next state with
   inputs left;
4. every cell (and leaf) visited while each reachable current token is current
   (walking back to that token whenever a cell moved the machine away),
   so every allowed-mask bit the machine reads is exercised;
5. a seeded random run: readings that stay put for a while (so that
   proposals get confirmed), hug thresholds or leave the envelope, with
   SLA failures, overrides, idle cycles and resets.
"""

from __future__ import annotations

import functools
import math
import random
from collections import deque
from dataclasses import dataclass

from certfsm import Leaf
from certfsm.machine import OUT_OF_ENVELOPE, Machine, State

from ._hardware import STATE_REGISTERS, Hardware
from ._leaves import walk


@dataclass(frozen=True)
class Cycle:
    """The inputs at one rising edge."""

    rst: bool
    in_valid: bool
    values: tuple[int, ...]
    sla_ok: bool = True
    override_request: bool = False
    override_code: int = 0


@dataclass(frozen=True)
class Layout:
    """Named bit fields of one hex word, most significant first; the printer and the packer share it."""

    fields: tuple[tuple[str, int], ...]

    @functools.cached_property
    def width(self) -> int:
        return sum(width for _, width in self.fields)

    @functools.cached_property
    def _shifts(self) -> tuple[tuple[int, int], ...]:
        return tuple((width, (1 << width) - 1) for _, width in self.fields)

    def pack(self, values) -> int:
        word = 0
        for (width, mask), value in zip(self._shifts, values):
            word = (word << width) | (value & mask)
        return word

    def unpack(self, word: int) -> dict[str, int]:
        result = {}
        for name, width in reversed(self.fields):
            result[name] = word & ((1 << width) - 1)
            word >>= width
        return dict(reversed(result.items()))

    @property
    def digits(self) -> int:
        return (self.width + 3) // 4


def stimulus_layout(hw: Hardware) -> Layout:
    return Layout(
        (
            ("rst", 1),
            ("in_valid", 1),
            ("sla_ok", 1),
            ("override_request", 1),
            ("override_code", 4),
            *((bank.bus.name, bank.bus.width) for bank in hw.banks),
        )
    )


def expected_layout(hw: Hardware) -> Layout:
    """The outputs, then the state registers in `STATE_REGISTERS` order (`Reference.edge` gives them so)."""
    return Layout(
        (
            ("out_valid", 1),
            ("token_code", 4),
            ("reason_code", 4),
            ("cell_index", hw.cell_width),
            *zip(STATE_REGISTERS, hw.state_widths),
        )
    )


def pack_cycle(layout: Layout, cycle: Cycle) -> int:
    return layout.pack(
        (
            int(cycle.rst),
            int(cycle.in_valid),
            int(cycle.sla_ok),
            int(cycle.override_request),
            cycle.override_code,
            *cycle.values,
        )
    )


Sample = tuple[int, "Leaf | None", bool, "int | None"]
"""What `Machine.step_leaf` gets for one valid cycle: (cell, its leaf or None out of envelope, sla_ok, override)."""


class Reference:
    """The module's ports and state edge by edge, from `Machine.cell_of_fixed`, `Machine.leaf_of_fixed` and
    `Machine.step_leaf`."""

    def __init__(self, hw: Hardware):
        self.hw, self.machine = hw, hw.machine
        self._token_of_code = {code: t for t, code in enumerate(self.machine.params.codes)}
        self._cells: dict[tuple[int, ...], tuple[int, Leaf | None]] = {}
        self._registers: dict[State, tuple[int, ...]] = {}
        self.reset()

    def reset(self) -> None:
        params = self.machine.params
        self.state = self.machine.initial_state()
        self.outputs = (0, params.codes[params.conservative], 0, self.hw.no_cell)
        self.stage = None

    def edge(self, cycle: Cycle) -> tuple[int, ...]:
        """Advance one rising edge; the expected-layout values seen after it."""
        if cycle.rst:
            self.reset()
        else:
            if self.stage is not None:
                cell = self.stage[0]
                self.state, token, reason = self.step(self.state, self.stage)
                shown = self.hw.no_cell if cell == OUT_OF_ENVELOPE else cell
                self.outputs = (1, self.machine.params.codes[token], int(reason), shown)
            else:
                self.outputs = (0, *self.outputs[1:])
            self.stage = self.sample(cycle) if cycle.in_valid else None
        registers = self._registers.get(self.state)
        if registers is None:
            registers = self._registers[self.state] = tuple(self.hw.register_values(self.state).values())
        return (*self.outputs, *registers)

    def sample(self, cycle: Cycle) -> Sample:
        """The (cell, leaf, sla_ok, override) that `step` gets for a valid cycle's inputs."""
        override = None
        if cycle.override_request:
            override = self._token_of_code.get(cycle.override_code, -1)
        found = self._cells.get(cycle.values)
        if found is None:
            machine = self.machine
            found = self._cells[cycle.values] = (
                machine.cell_of_fixed(cycle.values),
                machine.leaf_of_fixed(cycle.values),
            )
        return found[0], found[1], bool(cycle.sla_ok), override

    def step(self, state: State, sample: Sample) -> tuple[State, int, object]:
        """`Machine.step_leaf` on a sampled cycle: (next state, token, reason)."""
        _, leaf, sla_ok, override = sample
        return self.machine.step_leaf(state, leaf, sla_ok, override)


# ------------------------------------------------------------------ stimulus


def _bus_limits(bank) -> tuple[int, int]:
    if bank.signed:
        return -(1 << (bank.bus.width - 1)), (1 << (bank.bus.width - 1)) - 1
    return 0, (1 << bank.bus.width) - 1


def _corners(hw: Hardware, cell: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lower, upper) fixed-point corners of a cell: each input's lowest value in its bin and the one below the next."""
    lower, upper = [], []
    for bank, stride, bins in zip(hw.banks, hw.machine.strides, hw.machine.shape):
        b = cell // stride % bins
        lower.append(bank.low if b == 0 else bank.thresholds[b - 1])
        upper.append(bank.high if b == bins - 1 else bank.thresholds[b] - 1)
    return tuple(lower), tuple(upper)


def _leaf_corners(hw: Hardware) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(lower, upper) fixed-point corners of every leaf of a refined table, tree after tree: per input the lowest
    grid value of the leaf's side (ceil(low * 2^f)) and the highest (one below ceil(high * 2^f), or floor(high *
    2^f) on a closed side). A split at t is the lower side of its high leaves and the upper side of its low ones,
    so the corners meet it at its integer threshold and one LSB below."""
    refinement = hw.machine.refinement
    if refinement is None:
        return []
    corners = []
    for tree in refinement.trees:
        for box in tree.boxes:
            lower, upper = [], []
            for side, bank in zip(box.intervals, hw.banks):
                scale = 1 << bank.frac_bits
                lower.append(max(math.ceil(side.low * scale), bank.low))
                top = math.floor(side.high * scale) if side.closed else math.ceil(side.high * scale) - 1
                upper.append(min(top, bank.high))
            corners.append((tuple(lower), tuple(upper)))
    return corners


def _above_lower_corner(corners: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[tuple[int, ...]]:
    """Per leaf and input, the leaf's lower corner one LSB higher in that input (where the leaf holds it): every
    split's threshold is a leaf's lower side, so this meets each split one LSB above its threshold."""
    readings = []
    for lower, upper in corners:
        for i in range(len(lower)):
            if lower[i] + 1 <= upper[i]:
                readings.append(lower[:i] + (lower[i] + 1,) + lower[i + 1 :])
    return readings


def _valid(values, sla_ok=True, override=None) -> Cycle:
    return Cycle(False, True, tuple(values), sla_ok, override is not None, 0 if override is None else override)


class _Probes:
    """The machine's input classes and its transition graph over the states reachable from reset.

    One cell or leaf per distinct (proposal, allowed mask) stands for its
    class: the machine reads a cell or leaf only through those two.
    """

    def __init__(self, hw: Hardware):
        machine = hw.machine
        self.hw, self.reference = hw, Reference(hw)
        seen, classes = set(), []
        for values in entry_readings(hw):
            leaf = machine.leaf_of_fixed(values)
            assert leaf is not None
            if (leaf.token, leaf.allowed) not in seen:
                seen.add((leaf.token, leaf.allowed))
                classes.append(values)
        inside = classes[0]
        outside = tuple(bank.high + 1 if i == 0 else v for i, (bank, v) in enumerate(zip(hw.banks, inside)))
        readings = [*classes, outside]
        codes = list(machine.params.codes)
        spare = next(c for c in range(16) if c not in codes) if len(codes) < 16 else None
        overrides = [None, *codes] + ([spare] if spare is not None else [])
        self.inputs = [
            _valid(values, sla_ok, override)
            for values in readings
            for sla_ok in (True, False)
            for override in overrides
        ]
        self.steps = [self.reference.sample(cycle) for cycle in self.inputs]
        self.start = machine.initial_state()
        self.successors: dict[State, list[State]] = {}
        order = deque([self.start])
        self.paths: dict[State, tuple[int, ...]] = {self.start: ()}
        while order:
            state = order.popleft()
            following = [self.reference.step(state, step)[0] for step in self.steps]
            self.successors[state] = following
            for k, there in enumerate(following):
                if there not in self.paths:
                    self.paths[there] = self.paths[state] + (k,)
                    order.append(there)

    def _towards(self, goal) -> dict[State, int]:
        """Per state, the input (by index) that starts a shortest path to a state where `goal` holds (-1 there)."""
        into: dict[State, list[tuple[State, int]]] = {state: [] for state in self.successors}
        for state, following in self.successors.items():
            for k, there in enumerate(following):
                into[there].append((state, k))
        hop = {state: -1 for state in self.successors if goal(state)}
        queue = deque(hop)
        while queue:
            there = queue.popleft()
            for state, k in into[there]:
                if state not in hop:
                    hop[state] = k
                    queue.append(state)
        return hop

    def every_transition(self, reset: Cycle) -> list[Cycle]:
        """Every (reachable state, input class) transition at least once: from each state, each untried input;
        when the state reached has none left, reset and take the shortest path to the next state that has."""
        untested = {state: list(range(len(self.inputs))) for state in self.successors}
        cycles, state = [reset], self.start
        for target in self.paths:
            while untested[target]:
                if state != target:
                    cycles += [reset, *(self.inputs[k] for k in self.paths[target])]
                    state = target
                while untested[state]:
                    k = untested[state].pop()
                    cycles.append(self.inputs[k])
                    state = self.successors[state][k]
        return cycles

    def every_reading_under(self, readings: list[tuple[int, ...]]) -> list[Cycle]:
        """For each reachable current token: every reading (one per cell and leaf) given while that token is
        current."""
        cycles = []
        state = self.start
        for token in sorted({s.current for s in self.successors}):
            hop = self._towards(lambda s: s.current == token)
            for values in readings:
                while state.current != token:
                    cycles.append(self.inputs[hop[state]])
                    state = self.successors[state][hop[state]]
                cycle = _valid(values)
                cycles.append(cycle)
                state = self.reference.step(state, self.reference.sample(cycle))[0]
        return cycles


def entry_readings(hw: Hardware) -> list[tuple[int, ...]]:
    """One reading per ROM entry the module reads: the lower corner of every cell that is not refined, in cell
    order, then of every leaf (a refined cell's own entry is never read)."""
    refinement = hw.machine.refinement
    refined = set() if refinement is None else set(refinement.cells)
    cells = [_corners(hw, cell)[0] for cell in range(hw.machine.n_cells) if cell not in refined]
    return cells + [lower for lower, _ in _leaf_corners(hw)]


def stimulus(hw: Hardware, random_steps: int, seed: int = 0) -> list[Cycle]:
    """Every class of input the module docstring lists, then `random_steps` seeded random edges."""
    machine = hw.machine
    reset = Cycle(True, False, tuple(bank.low for bank in hw.banks))
    cycles = [reset, reset]
    for cell in range(machine.n_cells):
        lower, upper = _corners(hw, cell)
        cycles += [_valid(lower), _valid(upper)]
    leaves = _leaf_corners(hw)
    for lower, upper in leaves:
        cycles += [_valid(lower), _valid(upper)]
    cycles += [_valid(values) for values in _above_lower_corner(leaves)]
    middle = _corners(hw, machine.n_cells // 2)[0]
    for i, bank in enumerate(hw.banks):
        smallest, largest = _bus_limits(bank)
        for value in sorted({smallest, bank.low - 1, bank.low, bank.high, bank.high + 1, largest}):
            if smallest <= value <= largest:
                cycles.append(_valid(middle[:i] + (value,) + middle[i + 1 :]))
    probes = _Probes(hw)
    cycles += [*probes.every_transition(reset), reset, *probes.every_reading_under(entry_readings(hw))]
    cycles += _random_run(hw, random_steps, seed)
    cycles.append(Cycle(False, False, cycles[-1].values))
    return cycles


def _split_thresholds(machine: Machine) -> list[set[int]]:
    """Per input, the integer thresholds of the splits of a refined table's trees (none for a flat one)."""
    found: list[set[int]] = [set() for _ in machine.edges]
    for tree in () if machine.refinement is None else machine.refinement.trees:
        walk(tree, lambda i, t, low, high: found[i].add(t), lambda k: None)
    return found


def _random_run(hw: Hardware, steps: int, seed: int) -> list[Cycle]:
    rng = random.Random(seed)
    splits = _split_thresholds(hw.machine)
    limits = [_bus_limits(bank) for bank in hw.banks]
    special = [sorted({*bank.thresholds, *splits[i], bank.low, bank.high}) for i, bank in enumerate(hw.banks)]

    def value(i: int) -> int:
        bank, (smallest, largest) = hw.banks[i], limits[i]
        roll = rng.random()
        if roll < 0.6:
            return rng.randint(bank.low, bank.high)
        if roll < 0.95:
            return min(max(rng.choice(special[i]) + rng.randint(-1, 1), smallest), largest)
        return rng.randint(smallest, largest)

    values = [bank.low for bank in hw.banks]
    cycles = []
    for _ in range(steps):
        if rng.random() < 0.3:
            values = [value(i) if rng.random() < 0.5 else v for i, v in enumerate(values)]
        override = rng.randrange(16) if rng.random() < 0.05 else None
        cycles.append(
            Cycle(
                rng.random() < 0.001,
                rng.random() < 0.95,
                tuple(values),
                rng.random() < 0.97,
                override is not None,
                0 if override is None else override,
            )
        )
    return cycles


def write_vectors(hw: Hardware, cycles: list[Cycle], stimulus_path, expected_path) -> int:
    """Write both $readmemh files (one hex word per line); returns the number of edges."""
    reference = Reference(hw)
    driven, seen = stimulus_layout(hw), expected_layout(hw)
    drive_digits, expect_digits = driven.digits, seen.digits
    drive_lines: dict[Cycle, str] = {}  # the same cycles and outputs recur often: each line is packed once
    expect_lines: dict[tuple[int, ...], str] = {}
    with open(stimulus_path, "w") as drive, open(expected_path, "w") as expect:
        for cycle in cycles:
            line = drive_lines.get(cycle)
            if line is None:
                line = drive_lines[cycle] = f"{pack_cycle(driven, cycle):0{drive_digits}x}\n"
            drive.write(line)
            values = reference.edge(cycle)
            line = expect_lines.get(values)
            if line is None:
                line = expect_lines[values] = f"{seen.pack(values):0{expect_digits}x}\n"
            expect.write(line)
    return len(cycles)
