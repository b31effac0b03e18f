"""`certfsm export-c`: the machine as C99 (header and source), and with ``check`` compiled and run against Python.

The check compiles the exported source with ``gcc -std=c99 -Wall -Wextra
-Werror`` next to a small driver that reads one cycle per line (the test
bench's vectors, `_vectors.stimulus`) and prints the outputs and the state
after it; the expected lines come from the Python reference
(`Machine.cell_of_fixed`, `Machine.leaf_of_fixed` and
`Machine.step_leaf`, one decision per valid reading, `in_valid` 0
holding everything; the vectors meet every leaf of a refined table at
its corners and each split one LSB either side of its threshold), so 0 mismatches means the C
agrees with the certified machine on every vector. Beside it run the
``misra`` check (cppcheck's MISRA C:2012 addon; every finding must be a
justified deviation of `MISRA_DEVIATIONS`) and ``cortex_m_size`` (the
flash and static RAM of the source cross-compiled for a Cortex-M4), both
in `_c_checks.py`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from certfsm.machine import OUT_OF_ENVELOPE

from ._c import print_c
from ._c_checks import cortex_m_size, misra_check
from ._checks import Check
from ._export import DEFAULT_RANDOM_STEPS, CheckedExport, check_random_steps, checks_record, export_source
from ._files import file_sha256, output_folder
from ._hardware import STATE_REGISTERS, Hardware
from ._vectors import Cycle, stimulus

GCC_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O2")
_DRIVER = """/* certfsm export-c check: one cycle per input line, the outputs and state after it per output line. */
#include <stdio.h>
#include "{name}.h"

int main(void)
{{
    {name}_state state;
    {name}_output out;
    {name}_input in;
    long long v[{fields}];
    {name}_reset(&state, &out);
    for (;;) {{
        int i;
        for (i = 0; i < {fields}; i++) {{
            if (scanf("%lld", &v[i]) != 1) return 0;
        }}
        if (v[0]) {{
            {name}_reset(&state, &out);
        }} else {{
{assign}
            {name}_step(&state, &in, &out);
        }}
        printf("%u %u %u %u %u %u %u %u %u\\n", (unsigned) out.out_valid, (unsigned) out.token_code,
               (unsigned) out.reason_code, (unsigned) out.cell_index, (unsigned) state.current,
               (unsigned) state.candidate_valid, (unsigned) state.candidate, (unsigned) state.count,
               (unsigned) state.cooldown);
    }}
}}
"""


@dataclass(frozen=True)
class CExport(CheckedExport):
    """What `export_c` wrote and found: the folder, the header and source, the summary and the checks run."""

    folder: Path
    header: Path
    source: Path
    summary: dict
    checks: tuple[Check, ...]


def export_c(
    artifact_path,
    out,
    *,
    check: bool = False,
    module: str | None = None,
    random_steps: int = DEFAULT_RANDOM_STEPS,
    seed: int = 0,
) -> CExport:
    """Export a certified artifact (refused as `load_artifact` refuses it) as C99 into folder `out`."""
    check_random_steps(random_steps)
    hw, artifact = export_source(artifact_path, module)
    header_text, source_text = print_c(hw)  # before the folder: a token name C cannot take leaves nothing behind
    folder = output_folder(out, "export folder", "out")
    name = hw.module.name
    header, source = folder / f"{name}.h", folder / f"{name}.c"
    header.write_text(header_text)
    source.write_text(source_text)
    checks = _run_checks(hw, folder, header.name, source.name, random_steps, seed) if check else ()
    summary = {
        "certfsm_export_c": 1,
        "artifact": artifact,
        "module": name,
        "language": "C99",
        "cells": hw.machine.n_cells,
        **({"leaves": hw.machine.refinement.n_leaves} if hw.machine.refinement is not None else {}),
        "files": {p.name: file_sha256(p) for p in (header, source)},
        **checks_record(checks, check),
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return CExport(folder, header, source, summary, checks)


def _run_checks(
    hw: Hardware, folder: Path, header: str, source: str, random_steps: int, seed: int
) -> tuple[Check, ...]:
    """The three checks, side by side: the MISRA analysis (a cppcheck process) while the C runs against Python."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        misra = pool.submit(misra_check, folder, [source, header])
        reference = pool.submit(compile_and_compare, hw, folder, random_steps, seed)
        size = pool.submit(cortex_m_size, folder, source)
        return reference.result(), misra.result(), size.result()


def compile_and_compare(hw: Hardware, folder: Path, random_steps: int, seed: int = 0) -> Check:
    """Compile the exported C with its driver and compare its outputs with the Python reference, cycle by cycle."""
    started = time.perf_counter()
    gcc = shutil.which("gcc")
    if gcc is None:
        return Check("c_reference", False, "gcc is not on PATH; apt-get install -y gcc")
    name = hw.module.name
    buses = [bank.bus.name for bank in hw.banks]
    fields = 5 + len(buses)
    names = ["in_valid", "sla_ok", "override_request", "override_code", *buses]
    assign = "\n".join(f"            in.{field} = v[{k + 1}];" for k, field in enumerate(names))
    (folder / f"{name}_check.c").write_text(_DRIVER.format(name=name, fields=fields, assign=assign))
    program = folder / f"{name}_check"
    compiled = subprocess.run(
        [gcc, *GCC_FLAGS, "-o", program.name, f"{name}.c", f"{name}_check.c"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    (folder / "c-compile.log").write_text(compiled.stdout + compiled.stderr)
    if compiled.returncode != 0:
        first = (compiled.stderr.strip().splitlines() or ["no output"])[0]
        return Check(
            "c_reference",
            False,
            f"gcc {' '.join(GCC_FLAGS)} failed: {first}",
            log="c-compile.log",
            seconds=time.perf_counter() - started,
        )
    cycles = stimulus(hw, random_steps, seed)
    text = "".join(
        " ".join(
            map(str, (int(c.rst), int(c.in_valid), int(c.sla_ok), int(c.override_request), c.override_code, *c.values))
        )
        + "\n"
        for c in cycles
    )
    ran = subprocess.run([str(program.resolve())], input=text, capture_output=True, text=True, cwd=folder)
    if ran.returncode != 0:
        return Check(
            "c_reference", False, f"the compiled check exited {ran.returncode}", seconds=time.perf_counter() - started
        )
    seen = ran.stdout.splitlines()
    expected = list(python_reference(hw, cycles))
    mismatches = [k for k, (a, b) in enumerate(zip(seen, expected)) if a != b]
    if len(seen) != len(expected):
        mismatches.append(min(len(seen), len(expected)))
    numbers = {"steps": len(cycles), "mismatches": len(mismatches), "flags": " ".join(GCC_FLAGS)}
    if mismatches:
        k = mismatches[0]
        numbers["first_mismatch"] = {
            "step": k,
            "cycle": repr(cycles[k]) if k < len(cycles) else None,
            "seen": seen[k] if k < len(seen) else None,
            "expected": expected[k] if k < len(expected) else None,
        }
    detail = (
        f"{len(cycles)} steps, {len(mismatches)} mismatches against the Python reference (gcc {' '.join(GCC_FLAGS)})"
    )
    return Check("c_reference", not mismatches, detail, numbers, "c-compile.log", time.perf_counter() - started)


def python_reference(hw: Hardware, cycles: list[Cycle]):
    """Per cycle, the line the C driver must print: outputs then state registers (`STATE_REGISTERS` order)."""
    machine, params = hw.machine, hw.machine.params
    token_of_code = {code: t for t, code in enumerate(params.codes)}
    state = machine.initial_state()
    outputs = (0, params.codes[params.conservative], 0, hw.no_cell)
    found: dict[tuple[int, ...], tuple] = {}  # the same readings recur often: each is binned once
    for cycle in cycles:
        if cycle.rst:
            state = machine.initial_state()
            outputs = (0, params.codes[params.conservative], 0, hw.no_cell)
        elif cycle.in_valid:
            cell, leaf = found.get(cycle.values) or found.setdefault(
                cycle.values, (machine.cell_of_fixed(cycle.values), machine.leaf_of_fixed(cycle.values))
            )
            override = token_of_code.get(cycle.override_code, -1) if cycle.override_request else None
            state, token, reason = machine.step_leaf(state, leaf, cycle.sla_ok, override)
            outputs = (1, params.codes[token], int(reason), hw.no_cell if cell == OUT_OF_ENVELOPE else cell)
        else:
            outputs = (0, *outputs[1:])
        registers = hw.register_values(state)
        yield " ".join(map(str, (*outputs, *(registers[r] for r in STATE_REGISTERS))))
