"""`certfsm export-verilog`: write the module, its test bench and vectors, run the checks, record them in summary.json.

The summary ties the chain together for a stranger: the artifact's
payload SHA-256 (the one its certificate covers) and its file's SHA-256,
the SHA-256 of every file written, each check with pass/fail and its
numbers, and the version of every tool that ran.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

from certfsm import SpecError
from certfsm.machine import Machine

from ._checks import CHECK_TOOLS, Check, lint, simulate, synth_generic, tool_versions
from ._ecp5 import ECP5_CHECKS, synthesize_and_place_anywhere
from ._equivalence import equivalence_check
from ._files import certified_machine, file_sha256, output_folder, spec_error_of
from ._hardware import LATENCY, STATE_REGISTERS, Hardware, check_module_name, default_module_name, hardware_of
from ._targets import TableFit, check_fit_for_check, table_fit
from ._vectors import expected_layout, stimulus, stimulus_layout, write_vectors
from ._verilog import print_testbench, print_verilog

DEFAULT_RANDOM_STEPS = 200_000
"""Random edges in the default bench (on top of the structured ones); the benchmark runs 1 000 000 and more."""


class CheckedExport:
    """What every export result answers from its `checks`."""

    checks: tuple[Check, ...]

    @property
    def is_ok(self) -> bool:
        """Every check that ran passed."""
        return all(check.passed for check in self.checks)


@dataclass(frozen=True)
class Export(CheckedExport):
    """What `export_verilog` wrote and found: the folder, the module file, the summary and the checks run."""

    folder: Path
    module_file: Path
    summary: dict
    checks: tuple[Check, ...]


def checks_record(checks: tuple[Check, ...], checked: bool) -> dict:
    """The part of an export's summary.json about its checks: whether they ran, each one, and whether all passed."""
    return {
        "checked": checked,
        "checks": {c.name: c.as_json() for c in checks},
        "passed": all(c.passed for c in checks) if checked else None,
    }


class ExportSource(NamedTuple):
    """A certified artifact ready to print: its hardware structure and what a summary records of the artifact."""

    hardware: Hardware
    artifact: dict


def export_source(
    artifact_path, module: str | None, before_hardware: Callable[[Machine], object] | None = None
) -> ExportSource:
    """Load a certified artifact (as `certified_machine`) and build its hardware structure; a spec the hardware
    cannot take is a SpecError naming the artifact and the fix. `before_hardware` sees the machine first."""
    artifact, machine = certified_machine(artifact_path)
    if before_hardware is not None:
        before_hardware(machine)
    name = check_module_name(module or default_module_name(artifact.stored_spec.name))
    try:
        hw = hardware_of(machine, name, artifact.stored_spec.units)
    except SpecError as error:
        raise spec_error_of(artifact_path, error) from None
    return ExportSource(
        hw,
        {
            "file": Path(artifact_path).name,
            "payload_sha256": artifact.sha256,
            "file_sha256": file_sha256(artifact_path),
        },
    )


def check_random_steps(random_steps: int) -> None:
    """Refuse a negative count of random test cycles before anything is loaded or written."""
    if random_steps < 0:
        raise SpecError(f"random_steps={random_steps} is negative; give 0 or more")


def export_verilog(
    artifact_path,
    out,
    *,
    check: bool = False,
    module: str | None = None,
    random_steps: int = DEFAULT_RANDOM_STEPS,
    seed: int = 0,
    on_fit: Callable[[TableFit], object] | None = None,
) -> Export:
    """Export a certified artifact (refused as `load_artifact` refuses it) as Verilog into folder `out`.

    Before the hardware is built or anything written, `on_fit` gets where the table fits (`table_fit`), and with
    `check` a table no target's block RAM holds is refused (`check_fit_for_check`). With `check`, synthesis and
    place and route go to the iCE40 HX8K where it holds the module, else to the smallest ECP5 that does
    (`_ecp5.py`: the checks ``synth_ecp5`` and ``place_and_route_ecp5``, which pass when an ECP5 holds and places
    it); a module no listed device holds fails them, naming its counts.
    """
    check_random_steps(random_steps)
    source = export_source(artifact_path, module, lambda machine: fit_before_export(machine, check, on_fit))
    return _export(source.hardware, out, check, random_steps, seed, source.artifact)


def export_machine(
    machine: Machine,
    out,
    module_name: str,
    units=None,
    *,
    check: bool = False,
    random_steps: int = DEFAULT_RANDOM_STEPS,
    seed: int = 0,
    artifact: dict | None = None,
    on_fit: Callable[[TableFit], object] | None = None,
) -> Export:
    """Export one `Machine` (normally decoded by `Machine.from_artifact`); `export_verilog` for a machine in hand."""
    check_random_steps(random_steps)
    fit_before_export(machine, check, on_fit)
    return _export(hardware_of(machine, module_name, units), out, check, random_steps, seed, artifact)


def fit_before_export(machine: Machine, check: bool, on_fit: Callable[[TableFit], object] | None) -> TableFit:
    """Where `machine`'s table fits, refused first when `check` would place what cannot be placed, then told."""
    fit = table_fit(machine)
    if check:
        check_fit_for_check(fit)
    if on_fit is not None:
        on_fit(fit)
    return fit


def _export(hw: Hardware, out, check: bool, random_steps: int, seed: int, artifact: dict | None) -> Export:
    """Write the module, its bench and vectors into `out`, run the checks when asked, and write summary.json."""
    machine, module_name = hw.machine, hw.module.name
    folder = output_folder(out, "export folder", "out")
    module_file = folder / f"{module_name}.v"
    bench_file = folder / f"{module_name}_tb.v"
    module_file.write_text(print_verilog(hw.module))
    started = time.perf_counter()
    steps = write_vectors(hw, stimulus(hw, random_steps, seed), folder / "stimulus.hex", folder / "expected.hex")
    vectors_seconds = time.perf_counter() - started
    bench_file.write_text(print_testbench(hw.module, stimulus_layout(hw), expected_layout(hw), steps))

    fit = table_fit(machine)
    checks: tuple[Check, ...] = ()
    if check:
        # The checks are independent (each reads the module and writes its own files): two tool processes side by
        # side, the long synthesis and place and route on one, the rest on the other.
        with ThreadPoolExecutor(max_workers=2) as pool:
            simulated = pool.submit(
                lambda: (
                    lint(folder, module_file.name),
                    simulate(folder, module_file.name, bench_file.name, steps, expected_layout(hw)),
                    synth_generic(folder, module_file.name, module_name),
                )
            )
            placed = pool.submit(lambda: synthesize_and_place_anywhere(folder, module_file.name, module_name, fit))
            proved = pool.submit(lambda: (equivalence_check(machine, folder, module_file.name),))
            checks = simulated.result() + placed.result() + proved.result()
    files = {
        path.name: file_sha256(path)
        for path in (module_file, bench_file, folder / "stimulus.hex", folder / "expected.hex")
    }
    summary = {
        "certfsm_export": 1,
        "artifact": artifact or {"payload_sha256": machine.artifact_sha256},
        "module": {
            "name": module_name,
            "file": module_file.name,
            "sha256": files[module_file.name],
            "language": "Verilog-2005",
            "latency_cycles": LATENCY,
            "decisions_per_clock": 1,
            "cells": machine.n_cells,
            "grid": list(machine.shape),
            "table": fit.as_json(),
            "ports": [
                {"name": p.name, "direction": p.direction, "width": p.width, "signed": p.signed}
                for p in hw.module.ports
            ],
            "state_registers": dict(zip(STATE_REGISTERS, hw.state_widths)),
        },
        "testbench": {
            "file": bench_file.name,
            "steps": steps,
            "random_steps": random_steps,
            "seed": seed,
            "vectors_seconds": round(vectors_seconds, 3),
        },
        "files": files,
        **checks_record(checks, check),
    }
    if check:
        placed_on_ecp5 = any(c.name in ECP5_CHECKS for c in checks)
        summary["tools"] = tool_versions(CHECK_TOOLS + (("nextpnr-ecp5",) if placed_on_ecp5 else ()))
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return Export(folder, module_file, summary, checks)
