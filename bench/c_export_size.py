"""Benchmark: flash and static RAM of the exported C on a Cortex-M4, for the example and a table of ACAS Xu size.

Per case, `certfsm export-c`'s C is cross-compiled by the ``cortex_m_size``
check (zig cc of the ``ziglang`` wheel, thumb-freestanding-eabi,
-mcpu=cortex_m4, -Os, one object, not linked) and the object's sections
are read by certfsm's ELF32 reader: flash = .text + .rodata + .data (+
other allocated contents such as .ARM.exidx), static RAM = .data + .bss.
The machine's state and outputs live in the caller's structs, so the
static RAM is 0; the stack of one call is not counted.

Cases:

- ``example``: the shipped controller (8x9x4x5x5 = 7 200 cells), distilled
  into a temporary folder (about 2 s) and exported by `export_c`.
- ``acasxu-full-size``: a synthetic machine with the grid of bench/distill.py's
  acasxu-full case (ACAS Xu network 1_1's normalised inputs, rho
  binned finely at close range: 17x8x8x2x2 = 4 352 cells, five advisories
  COC..SR, every input with frac_bits 16 and its edges on that grid, as
  bench/hdl.py widens them). Distilling the real table takes 15 to 25
  minutes on 2 cores, and the size does not depend on the table's
  contents (one byte per cell in each of the two ROMs, whatever the
  tokens), so its tokens and masks are drawn from a fixed seed. It is
  built as a `certfsm.machine.Machine` and exported through the same
  `hardware_of` and `print_c` as an artifact; it is not certified.
- ``--artifact A.cfsm`` (repeatable) adds a real certified artifact, for
  instance the acasxu-full one that ``bench/distill.py --acas-full
  --out-dir DIR`` leaves in DIR.

``--misra`` also runs the ``misra`` check on each case (cppcheck's MISRA
C:2012 addon; about 20 s on the example).

    python bench/c_export_size.py [--misra] [--artifact A.cfsm ...] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import distill as distill_bench  # noqa: E402  (the ACAS Xu inputs and the acasxu-full grid of the distillation)

ACAS_FRAC_BITS = 16
SEED = 20240501


def acasxu_size_machine():
    """A machine with the acasxu-full grid (bench/distill.py), tokens and masks from `SEED` (not certified)."""
    from certfsm.machine import Machine, MachineParams

    scale = 2**ACAS_FRAC_BITS
    edges = []
    for (_, low, high), bins in zip(distill_bench.ACAS_INPUTS, distill_bench.ACAS_BINS["acasxu-full"]):
        low_int, high_int = math.floor(low * scale), math.ceil(high * scale)
        if isinstance(bins, int):
            row = [round(low_int + (high_int - low_int) * k / bins) for k in range(bins + 1)]
        else:
            row = [low_int] + [math.ceil(edge * scale) for edge in bins[1:-1]] + [high_int]
        edges.append(tuple(v / scale for v in row))
    tokens = distill_bench.ACAS_OUTPUTS
    cells = math.prod(len(row) - 1 for row in edges)
    draw = random.Random(SEED)
    allowed = tuple(draw.randrange(1 << len(tokens)) | 1 for _ in range(cells))  # COC (0) always allowed
    proposal = tuple(draw.choice([t for t in range(len(tokens)) if mask >> t & 1]) for mask in allowed)
    params = MachineParams(
        n_tokens=len(tokens),
        conservative=0,
        confirm_cycles=2,
        cooldown_cycles=3,
        overridable=frozenset({0}),
        codes=tuple(range(len(tokens))),
    )
    return Machine(
        names=tuple(name for name, _, _ in distill_bench.ACAS_INPUTS),
        edges=tuple(edges),
        frac_bits=(ACAS_FRAC_BITS,) * len(edges),
        tokens=tokens,
        proposal=proposal,
        exact=tuple(draw.random() < 0.3 for _ in range(cells)),
        allowed=allowed,
        params=params,
        artifact_sha256="(synthetic: not certified)",
    )


def export_machine_c(machine, name: str, folder: Path) -> Path:
    """Print one machine as C into `folder`; the source file."""
    from certfsm.hdl_export import hardware_of, print_c

    header, source = print_c(hardware_of(machine, name, ("normalised",) * machine.n_inputs))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.h").write_text(header)
    (folder / f"{name}.c").write_text(source)
    return folder / f"{name}.c"


def distil_example(folder: Path) -> Path:
    from certfsm import load_spec
    from certfsm.examples import example_spec_path
    from certfsm.fsm import distill_controller

    spec = load_spec(example_spec_path("coadapt"))
    distill_controller(spec, out=folder / "example.cfsm", report=folder / "example-report", jobs=2)
    return folder / "example.cfsm"


def export_artifact_c(artifact: Path, folder: Path) -> tuple[Path, object]:
    from certfsm.hdl_export import export_c

    result = export_c(artifact, folder)
    return result.source, result


def measure(case: str, source: Path, cells: int, grid: str, misra: bool) -> dict:
    from certfsm.hdl_export import cortex_m_size, misra_check

    size = cortex_m_size(source.parent, source.name)
    if not size.passed:
        raise SystemExit(f"{case}: cortex_m_size failed: {size.detail}")
    row = {"case": case, "grid": grid, "cells": cells, **size.numbers, "compile_seconds": size.seconds}
    if misra:
        started = time.perf_counter()
        checked = misra_check(source.parent, [source.name, source.with_suffix(".h").name])
        row["misra"] = (
            f"{checked.numbers['violations']} violations"
            if "violations" in checked.numbers
            else f"FAIL: {checked.detail}"
        )
        row["misra_seconds"] = time.perf_counter() - started
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misra", action="store_true", help="also run the misra check on each case")
    parser.add_argument(
        "--artifact",
        type=Path,
        action="append",
        default=[],
        help="a certified .cfsm artifact to add as a row (repeatable)",
    )
    parser.add_argument("--out-dir", type=Path, help="keep the exported C here (default: a temporary folder)")
    args = parser.parse_args()

    from certfsm import load_artifact
    from certfsm.machine import Machine

    with tempfile.TemporaryDirectory() as temporary:
        out = args.out_dir or Path(temporary)
        out.mkdir(parents=True, exist_ok=True)
        rows = []
        example = distil_example(out)
        source, _ = export_artifact_c(example, out / "example-c")
        machine = Machine.from_artifact(load_artifact(example))
        rows.append(measure("example", source, machine.n_cells, "x".join(map(str, machine.shape)), args.misra))
        synthetic = acasxu_size_machine()
        source = export_machine_c(synthetic, "certfsm_acasxu_full_size", out / "acasxu-full-size-c")
        rows.append(
            measure(
                "acasxu-full-size (synthetic)",
                source,
                synthetic.n_cells,
                "x".join(map(str, synthetic.shape)),
                args.misra,
            )
        )
        for k, artifact in enumerate(args.artifact):
            source, _ = export_artifact_c(artifact, out / f"artifact-{k}-c")
            machine = Machine.from_artifact(load_artifact(artifact))
            rows.append(measure(artifact.name, source, machine.n_cells, "x".join(map(str, machine.shape)), args.misra))

    print(f"target: {rows[0]['target']} (zig cc, one object, not linked)\n")
    columns = [
        "case",
        "grid",
        "cells",
        "text",
        "rodata",
        "data",
        "bss",
        "other flash",
        "flash bytes",
        "RAM bytes",
        "flash per cell",
    ] + (["MISRA C:2012"] if args.misra else [])
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" if c in ("case", "grid", "MISRA C:2012") else "---:" for c in columns) + "|")
    for row in rows:
        cells = [
            row["case"],
            row["grid"],
            f"{row['cells']:,}",
            f"{row['text']:,}",
            f"{row['rodata']:,}",
            f"{row['data']:,}",
            f"{row['bss']:,}",
            f"{row['other_flash']:,}",
            f"{row['flash_bytes']:,}",
            f"{row['ram_bytes']:,}",
            f"{row['flash_bytes'] / row['cells']:.2f}",
        ]
        if args.misra:
            cells.append(row["misra"])
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
