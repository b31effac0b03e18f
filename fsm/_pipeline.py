"""`certfsm distill` end to end: distil, prove, cross-check, then write the report folder and the artifact.

Order matters for what a failure leaves behind. Everything is computed
and written into a staging folder first (the SMT-LIB files of the proofs
live there), the artifact is written atomically while the staging folder
still exists, and only then does the report folder replace the old one.
Bad input or a crash at any point leaves the previous artifact and report
untouched.

The artifact is certified (every required certificate entry `proved`)
only when:

- ``cells-exact``: every exact cell's token was proved for the whole cell
  by the distillation, and the sampled cross-check found no input of an
  exact cell where the network decides otherwise (a mismatch would be a
  concrete, re-evaluated counterexample, so the verdict is then
  ``violated``);
- ``table-*``: Z3 proves the table-level properties (`prove_table`);
- ``machine-*``: Z3 proves the inductive invariant and every machine
  property over the table's cell classes (`prove_machine`);
- ``enumeration-*``: explicit-state enumeration proves the same machine
  properties, and no property is proved by one engine and refuted by the
  other.

An uncertified artifact is still written, so that `certfsm inspect` can
show why the runtime refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from certfsm import SpecError, staged_folder

from ._distill import Distillation, distill, sampled_cross_check
from ._distill_report import write_summary
from ._explicit import alphabet, check_explicit, table_rows
from ._machine import MachineParams, Proof
from ._machine_proofs import disagreements, prove_machine
from ._table import EXACT, prove_table

CROSS_CHECK_SAMPLES = 100_000
_CELLS_EXACT = "cells-exact"

Stage = Callable[[str], None]


@dataclass(frozen=True)
class DistillRun:
    """What `distill_controller` did: the distillation, every proof, the cross-check and the files written."""

    distillation: Distillation
    cross_check: dict
    table_proofs: tuple[Proof, ...]
    machine_proofs: tuple[Proof, ...]
    explicit_proofs: tuple[Proof, ...]
    disagreements: tuple[str, ...]
    certificate: tuple[dict, ...]
    artifact_path: Path
    artifact_sha256: str
    report_path: Path
    summary: dict

    @property
    def certified(self) -> bool:
        return is_certified(self.certificate)


def is_certified(certificate) -> bool:
    """The runtime's rule: every required certificate entry is proved."""
    return all(entry["verdict"] == "proved" for entry in certificate if entry["required"])


def distill_controller(spec, *, out, report, network=None, jobs: int | None = None, per_cell_timeout: float = 10.0,
                       checkpoint=None, seed: int = 0, samples: int = CROSS_CHECK_SAMPLES,
                       maps: tuple[tuple[str, str], ...] | None = None, progress=None,
                       stage: Stage | None = None) -> DistillRun:
    """Distil `spec`'s network into a certified table and machine; write `out` (.cfsm) and the `report` folder.

    `network` defaults to the spec's ONNX model. `maps` lists the input
    pairs of the decision-map pictures (default: one pair chosen from the
    rules), each drawn through the slice of the other inputs that shows
    the most tokens. `progress(done, total, message)` follows the distillation,
    `stage(message)` the steps after it. Raises SpecError for bad
    arguments and ReportError/ArtifactError when a file cannot be written.
    """
    from certfsm import ARTIFACT_SUFFIX

    from ._decision_map import busiest_slice, check_axes, default_axes, render_decision_map

    out, report = Path(out), Path(report)
    if out.suffix != ARTIFACT_SUFFIX:
        raise SpecError(f"--out {out}: an artifact file name ends in {ARTIFACT_SUFFIX}; give e.g. "
                        f"--out {out.with_suffix(ARTIFACT_SUFFIX).name}")
    if not (isinstance(samples, int) and samples >= CROSS_CHECK_SAMPLES):
        raise SpecError(f"--samples {samples!r}: the cross-check needs at least {CROSS_CHECK_SAMPLES} random inputs; "
                        f"give --samples {CROSS_CHECK_SAMPLES} or more")
    if network is None:
        from certfsm import load_onnx

        network = load_onnx(spec.model_path)
    pairs = tuple(maps) if maps else (default_axes(spec),)
    for x, y in pairs:
        check_axes(spec, x, y)
    tell = stage or (lambda message: None)

    distillation = distill(spec, network, jobs=jobs, per_cell_timeout=per_cell_timeout, checkpoint=checkpoint,
                           progress=progress, seed=seed)
    tell(f"cross-checking {samples} random inputs")
    cross = sampled_cross_check(distillation, spec, network, n=samples, seed=seed, check_onnxruntime=True)
    table = distillation.table
    params = MachineParams.from_spec(spec)
    with staged_folder(report) as staging:
        tell("proving the table (z3)")
        table_proofs = prove_table(table, spec, staging)
        tell("proving the state machine (z3)")
        machine_proofs = prove_machine(params, table, staging)
        tell("enumerating the state machine")
        explicit = check_explicit(params, alphabet(params, table_rows(table)))
        conflicts = tuple(disagreements(machine_proofs, explicit))
        certificate = _certificate(distillation, cross, table_proofs, machine_proofs, explicit, conflicts)
        tell("drawing the decision maps")
        pictures = [render_decision_map(spec, network, table, staging / f"decision-map-{x}-{y}.png", x_input=x,
                                        y_input=y, fixed=busiest_slice(spec, table, x, y),
                                        held_back=distillation.held_back) for x, y in pairs]
        _write_cells(staging / "cells.jsonl", distillation, spec)
        tell(f"writing {out}")
        artifact_sha256 = _write_artifact(out, spec, network, table, params, certificate)
        summary = write_summary(staging, spec=spec, network=network, distillation=distillation, cross_check=cross,
                                certificate=certificate, certified=is_certified(certificate),
                                disagreements=conflicts, pictures=pictures, artifact=out,
                                artifact_sha256=artifact_sha256)
    return DistillRun(distillation, cross, table_proofs, machine_proofs, explicit, conflicts, tuple(certificate),
                      out, artifact_sha256, report, summary)


def _certificate(distillation: Distillation, cross: dict, table_proofs, machine_proofs, explicit,
                 conflicts) -> list[dict]:
    """The artifact's certificate entries, all required; see the module docstring for what each one means."""
    status, engines = distillation.table.status, distillation.engine_of_cell
    used = sorted(set(engines[status == EXACT].tolist())) or ["none"]
    mismatches = cross["mismatches"]
    entries = [{"property": _CELLS_EXACT, "engine": "+".join(used),
                "verdict": "violated" if mismatches else "proved",
                "seconds": round(distillation.seconds, 3), "smt2": None, "smt2_sha256": None, "required": True}]
    for proof in (*table_proofs, *machine_proofs):
        entries.append(_entry(proof.property if proof.property.startswith("table-") else f"machine-{proof.property}",
                              proof))
    contradicted = {line.split(":", 1)[0] for line in conflicts}
    for proof in explicit:
        entry = _entry(f"enumeration-{proof.property}", proof)
        if proof.property in contradicted and entry["verdict"] == "proved":
            entry["verdict"] = "unknown"
        entries.append(entry)
    return entries


def _entry(name: str, proof: Proof) -> dict:
    return {"property": name, "engine": proof.engine, "verdict": proof.verdict, "seconds": round(proof.seconds, 3),
            "smt2": Path(proof.smt2_path).name if proof.smt2_path else None, "smt2_sha256": proof.smt2_sha256,
            "required": True}


def _write_artifact(out: Path, spec, network, table, params: MachineParams, certificate: list[dict]) -> str:
    from certfsm import write_artifact
    from certfsm.verify import certfsm_version

    grid = table.grid
    payload = {
        "spec": spec.to_json(),
        "model_sha256": network.sha256,
        "grid": {"edges": [edges.tolist() for edges in grid.edges], "frac_bits": list(grid.frac_bits)},
        "table": {"proposal": table.proposal.tolist(),
                  "status": "".join("e" if s == EXACT else "c" for s in table.status.tolist()),
                  "allowed": _bitmasks(table.allowed).tolist()},
        "machine": {"conservative": params.conservative, "confirm_cycles": params.confirm_cycles,
                    "cooldown_cycles": params.cooldown_cycles, "overridable": sorted(params.overridable),
                    "codes": list(params.codes)},
        "certificate": certificate,
        "created_by": f"certfsm {certfsm_version()}",
    }
    return write_artifact(out, payload)


def _bitmasks(allowed: np.ndarray) -> np.ndarray:
    """Row of booleans per cell -> integer with bit k set when output k is allowed."""
    return (allowed.astype(np.int64) << np.arange(allowed.shape[1], dtype=np.int64)).sum(axis=1)


def _write_cells(path: Path, distillation: Distillation, spec) -> None:
    """One JSON line per cell: status, token, what decided it, and the witness pair or the reason."""
    table, names = distillation.table, spec.outputs
    with open(path, "w", encoding="utf-8") as handle:
        for cell in range(table.n_cells):
            record = {"cell": cell, "bins": [int(b) for b in np.unravel_index(cell, table.grid.shape)],
                      "status": "exact" if table.status[cell] == EXACT else "conservative",
                      "token": names[int(table.proposal[cell])], "engine": str(distillation.engine_of_cell[cell])}
            if cell in distillation.witnesses:
                record["witness"] = [[float(v) for v in x] for x in distillation.witnesses[cell]]
            if cell in distillation.reasons:
                record["reason"] = distillation.reasons[cell]
            handle.write(json.dumps(record) + "\n")

