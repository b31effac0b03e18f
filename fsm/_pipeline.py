"""`certfsm distill` end to end: distil, prove, cross-check, then write the report folder and the artifact.

Order matters for what a failure leaves behind. Everything is computed
and written into a staging folder first (the SMT-LIB files of the proofs
live there), the artifact is written atomically while the staging folder
still exists, and only then does the report folder replace the old one.
Bad input or a crash at any point leaves the previous artifact and report
untouched.

The certificate is one `certfsm.VerdictRecord` per property, all
required; the artifact is certified by the core's one rule
(`certfsm.is_certified`, the loader's), which holds here only when:

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

The payload is built by the core (`certfsm.artifact_payload`, next to
the loader that reads it) and holds no run facts; times, jobs and the
other facts of the run go to summary.json.

An uncertified artifact is still written, so that `certfsm inspect` can
show why the runtime refuses it. So is an artifact that `strict=True`
does not accept (cells held back by the legality rules or undecided):
it is safe, only not the whole controller that was asked for, and the
report names its cells; `DistillRun.succeeded` says False.

Unless `checkpoint=` names a file, decided cells go to a checkpoint
beside the artifact (`default_checkpoint`: ``C.cfsm.checkpoint``), so a
run that stops (the guard, an interrupt, a crash) loses no searches: the
same call again resumes from it, and it is removed once the artifact is
written. A checkpoint never carries a proof (`_checkpoint`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from certfsm import (
    CELLS_EXACT,
    EngineError,
    LeafStatus,
    SpecError,
    VerdictRecord,
    certfsm_version,
    is_certified,
    staged_folder,
)
from certfsm.verify import WALL_CLOCK_GUARD, write_cell_certificate

from . import _cell_problem
from ._distill import Distillation, distill, sampled_cross_check
from ._distill_report import write_summary
from ._explicit import alphabet, check_explicit, table_rows
from ._machine import MachineParams, Proof
from ._machine_proofs import disagreements, prove_machine
from ._table import EXACT, prove_table

CROSS_CHECK_SAMPLES = 100_000
PROOF_RLIMIT = 200_000_000
"""Z3's deterministic resource count per table or machine query (the example's largest takes 0.6 M, 0.05 s), so
that the verdict does not depend on the machine's speed."""
PROOF_GUARD_SECONDS = 600.0
"""The wall-clock guard per table or machine query: when it fires before `PROOF_RLIMIT` is spent, the run stops."""

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
    certificate: tuple[VerdictRecord, ...]
    artifact_path: Path
    artifact_sha256: str
    report_path: Path
    summary: dict
    certified: bool
    """The core's one rule (`certfsm.is_certified`), the loader's: the runtime loads the artifact written."""
    shortfalls: tuple[str, ...] = ()
    """What keeps the table from being the whole network: cells held back by the legality rules, undecided cells
    (`shortfalls_of`); empty when every conservative cell has a witness."""
    strict: bool = False

    @property
    def succeeded(self) -> bool:
        """Certified and, with `strict`, without shortfalls: what `certfsm distill` exits 0 for."""
        return self.certified and not (self.strict and self.shortfalls)


def default_checkpoint(out) -> Path:
    """The checkpoint beside the artifact `out` when the caller names none: ``C.cfsm`` -> ``C.cfsm.checkpoint``."""
    out = Path(out)
    return out.with_name(out.name + ".checkpoint")


def shortfalls_of(distillation: Distillation) -> tuple[str, ...]:
    """Why the table is not the whole network, one phrase each: held-back cells (by token), undecided cells."""
    stats = distillation.stats
    found = []
    if stats["held_back_by_rules"]:
        tokens = ", ".join(f"{t} in {n}" for t, n in stats["held_back_by_token"].items())
        found.append(
            f"{stats['held_back_by_rules']} cells held back to the conservative token, where the network's proved "
            f"token is illegal or forbidden by a rule ({tokens})"
        )
    if stats["undecided"]:
        found.append(f"{stats['undecided']} cells undecided within the work budget (they hold the conservative token)")
    return tuple(found)


def distill_controller(
    spec,
    *,
    out,
    report,
    network=None,
    jobs: int | None = None,
    per_cell_timeout: float | None = None,
    checkpoint=None,
    seed: int = 0,
    samples: int = CROSS_CHECK_SAMPLES,
    maps: tuple[tuple[str, str], ...] | None = None,
    progress=None,
    stage: Stage | None = None,
    strict: bool = False,
    refine=None,
) -> DistillRun:
    """Distil `spec`'s network into a certified table and machine; write `out` (.cfsm) and the `report` folder.

    `network` defaults to the spec's ONNX model. `maps` lists the input
    pairs of the decision-map pictures (default: one pair chosen from the
    rules), each drawn through the slice of the other inputs that shows
    the most tokens. `progress(done, total, message)` follows the distillation,
    `stage(message)` the steps after it. `per_cell_timeout` is an optional
    wall-clock guard per cell (default None: the work budget alone ends
    each cell; see `_distill`). `checkpoint` defaults to
    `default_checkpoint(out)` (see the module docstring). With `strict`,
    the run succeeds only when no cell is held back or undecided
    (`DistillRun.succeeded`; the artifact and report are written either
    way). `refine` (a `certfsm.TreeBudget`) replaces the spec's ``refine``
    budget, and is written into the artifact's spec with it (None: the
    spec's own). Raises SpecError for bad arguments, ReportError/ArtifactError
    when a file cannot be written, EngineError when the guard fires.
    """
    from certfsm import ARTIFACT_SUFFIX

    from ._decision_map import busiest_slice, check_axes, default_axes, render_decision_map

    out, report = Path(out), Path(report)
    if refine is not None:
        from certfsm import MAX_TREE_DEPTH, MAX_TREE_LEAVES, TreeBudget

        if not (
            isinstance(refine, TreeBudget)
            and 1 <= refine.max_depth <= MAX_TREE_DEPTH
            and 2 <= refine.max_leaves <= MAX_TREE_LEAVES
        ):
            raise SpecError(
                f"refine={refine!r} is not a certfsm.TreeBudget with max_depth 1..{MAX_TREE_DEPTH} and max_leaves "
                f"2..{MAX_TREE_LEAVES}; give e.g. refine=TreeBudget(8, 64)"
            )
        spec = replace(spec, refine=refine)
    if out.suffix != ARTIFACT_SUFFIX:
        raise SpecError(
            f"out={str(out)!r}: an artifact file name ends in {ARTIFACT_SUFFIX}; give e.g. "
            f"out={out.with_suffix(ARTIFACT_SUFFIX).name!r}"
        )
    if not (isinstance(samples, int) and samples >= CROSS_CHECK_SAMPLES):
        raise SpecError(
            f"samples={samples!r}: the cross-check needs at least {CROSS_CHECK_SAMPLES} random inputs; "
            f"give samples={CROSS_CHECK_SAMPLES} or more"
        )
    if network is None:
        from certfsm import load_onnx

        network = load_onnx(spec.model_path)
    pairs = tuple(maps) if maps else (default_axes(spec),)
    for x, y in pairs:
        check_axes(spec, x, y)
    if not isinstance(strict, bool):
        raise SpecError(f"strict={strict!r} is not True or False; give strict=True or strict=False")
    tell = stage or (lambda message: None)
    resume_file = Path(checkpoint) if checkpoint is not None else default_checkpoint(out)
    if checkpoint is None:  # the artifact's folder is made for it anyway; a failure is the checkpoint's to name
        with contextlib.suppress(OSError):
            resume_file.parent.mkdir(parents=True, exist_ok=True)

    distillation = distill(
        spec,
        network,
        jobs=jobs,
        per_cell_timeout=per_cell_timeout,
        checkpoint=resume_file,
        progress=progress,
        seed=seed,
        restart_other_checkpoint=checkpoint is None,
    )
    tell(f"cross-checking {samples} random inputs")
    cross = sampled_cross_check(distillation, spec, network, n=samples, seed=seed, check_onnxruntime=True)
    table = distillation.table
    params = MachineParams.from_spec(spec)
    with staged_folder(report, parameter="report") as staging:
        tell("proving the table (z3)")
        # A refined table's leaves are part of what the machine reads, so every table and machine property
        # ranges over them as well as over the cells (docs/semantics.md, "Table properties").
        leaves = distillation.refinement
        table_proofs = prove_table(
            table, spec, staging, timeout=PROOF_GUARD_SECONDS, rlimit=PROOF_RLIMIT, refinement=leaves
        )
        tell("proving the state machine (z3)")
        machine_proofs = prove_machine(
            params, table, staging, timeout=PROOF_GUARD_SECONDS, rlimit=PROOF_RLIMIT, refinement=leaves
        )
        _stop_if_guarded(table_proofs + machine_proofs)
        tell("enumerating the state machine")
        explicit = check_explicit(params, alphabet(params, table_rows(table, leaves)))
        conflicts = tuple(disagreements(machine_proofs, explicit))
        tell("writing the proof certificate of the exact cells")
        cell_certificate = _write_cell_certificate(staging, distillation, network, spec)
        certificate = _certificate(
            distillation, cross, table_proofs, machine_proofs, explicit, conflicts, cell_certificate
        )
        certified = is_certified(certificate, spec.to_json(), bool((table.status == EXACT).any()))
        tell("drawing the decision maps")
        pictures = [
            render_decision_map(
                spec,
                network,
                table,
                staging / f"decision-map-{x}-{y}.png",
                x_input=x,
                y_input=y,
                fixed=busiest_slice(spec, table, x, y),
                held_back=distillation.held_back,
            )
            for x, y in pairs
        ]
        _write_cells(staging / "cells.jsonl", distillation, spec)
        if distillation.refinement is not None:
            _write_leaves(staging / "leaves.jsonl", distillation)
        tell(f"writing {out}")
        artifact_sha256 = _write_artifact(
            out, spec, network, table, params, certificate, refinement=distillation.refinement
        )
        summary = write_summary(
            staging,
            spec=spec,
            network=network,
            distillation=distillation,
            cross_check=cross,
            certificate=certificate,
            certified=certified,
            disagreements=conflicts,
            pictures=pictures,
            artifact=out,
            artifact_sha256=artifact_sha256,
            strict=strict,
            shortfalls=shortfalls_of(distillation),
            cell_certificate=cell_certificate,
        )
    if checkpoint is None:
        resume_file.unlink(missing_ok=True)
    return DistillRun(
        distillation,
        cross,
        table_proofs,
        machine_proofs,
        explicit,
        conflicts,
        certificate,
        out,
        artifact_sha256,
        report,
        summary,
        certified,
        shortfalls_of(distillation),
        strict,
    )


CELL_CERTIFICATE = "cells-exact.cert.json"


def _write_cell_certificate(folder: Path, distillation: Distillation, network, spec) -> dict:
    """Write the proof certificate of the exact cells and leaves (`verify.write_cell_certificate`); its summary
    entry.

    One entry per exact cell whose proof this run recorded, named "cell N:
    the decision is T", then one per exact leaf of a refined cell, named
    "cell N leaf K: the decision is T" (K its place among the cell's
    leaves in pre-order, as leaves.jsonl numbers them): a leaf is the same
    kind of claim as a cell, over its own box. A cell resumed from a
    checkpoint (its proof was not kept) or a proof that makes no
    certificate is counted in ``not_certified`` with the reason, never
    left out silently.
    """
    table, outputs = distillation.table, spec.outputs
    claims = [
        (f"cell {cell}: the decision is {outputs[int(table.proposal[cell])]}", prop, closures)
        for cell, (prop, closures) in sorted(distillation.proofs.items())
    ]
    exact_leaves = _exact_leaves(distillation.refinement)
    leaf_claims = [
        (f"cell {cell} leaf {leaf}: the decision is {outputs[exact_leaves[cell, leaf]]}", prop, closures)
        for (cell, leaf), (prop, closures) in sorted(distillation.leaf_proofs.items())
    ]
    sha256, written, missing = write_cell_certificate(folder / CELL_CERTIFICATE, network, claims + leaf_claims)
    exact = int(np.count_nonzero(table.status == EXACT))
    certified = sum(written)
    entry = {
        "file": CELL_CERTIFICATE,
        "sha256": sha256,
        "exact_cells": exact,
        "certified_cells": sum(written[: len(claims)]),
    }
    if distillation.refinement is not None:
        entry["exact_leaves"] = len(exact_leaves)
        entry["certified_leaves"] = sum(written[len(claims) :])
    uncertified = exact + len(exact_leaves) - certified
    if uncertified and table.n_cells > _cell_problem.CERTIFIED_CELLS_AT_MOST:
        entry["not_certified"] = (
            f"all {exact + len(exact_leaves)}: the table has {table.n_cells} cells, and distill keeps the proofs of "
            f"tables of at most {_cell_problem.CERTIFIED_CELLS_AT_MOST} cells (inspect --deep re-proves every exact "
            "cell and leaf instead)"
        )
    elif uncertified:
        resumed = exact - len(claims)
        reasons = [f"{resumed} cells decided in an earlier run (a checkpoint keeps no proofs)"] if resumed else []
        unproved_leaves = len(exact_leaves) - len(leaf_claims)
        reasons += [f"{unproved_leaves} leaves without a recorded proof"] if unproved_leaves else []
        failed = len(claims) + len(leaf_claims) - certified
        reasons += [f"{failed} whose proof makes no certificate (first: {missing})"] if failed else []
        entry["not_certified"] = "; ".join(reasons)
    return entry


def _exact_leaves(refinement) -> dict[tuple[int, int], int]:
    """(cell, leaf in pre-order) -> token of every exact leaf of `refinement` (None: no leaves)."""
    if refinement is None:
        return {}
    return {
        (cell, k): leaf.token
        for cell, tree in zip(refinement.cells, refinement.trees)
        for k, leaf in enumerate(tree.leaves)
        if leaf.status is LeafStatus.EXACT
    }


def _stop_if_guarded(proofs) -> None:
    """A proof the wall-clock guard ended would make the artifact depend on the machine's speed: stop instead."""
    for proof in proofs:
        if proof.reason.startswith(WALL_CLOCK_GUARD):
            raise EngineError(
                f"{proof.property}: {proof.reason} ({PROOF_GUARD_SECONDS:g} s, rlimit {PROOF_RLIMIT}), "
                "so its verdict would depend on the machine's speed; nothing was written; re-run on a "
                "less loaded machine"
            )


def _certificate(
    distillation: Distillation, cross: dict, table_proofs, machine_proofs, explicit, conflicts, cell_certificate: dict
) -> tuple[VerdictRecord, ...]:
    """The artifact's certificate, every record required; see the module docstring for what each one means. The
    cells-exact record names the proof certificate of the exact cells and leaves and its hash where it holds at
    least one claim, which chains the artifact to the proofs that `certfsm check-proof` re-checks."""
    status, engines = distillation.table.status, distillation.engine_of_cell
    used = sorted(set(engines[status == EXACT].tolist())) or ["none"]
    mismatches = cross["mismatches"]
    records = [
        VerdictRecord(
            "violated" if mismatches else "proved",
            "+".join(used),
            distillation.seconds,
            f"{mismatches} sampled inputs of exact cells decided otherwise" if mismatches else "",
            property=CELLS_EXACT,
            **_proof_certificate_of(cell_certificate),
        )
    ]
    for proof in (*table_proofs, *machine_proofs):
        name = proof.property if proof.property.startswith("table-") else f"machine-{proof.property}"
        records.append(_record(name, proof))
    contradicted = {line.split(":", 1)[0]: line for line in conflicts}
    for proof in explicit:
        record = _record(f"enumeration-{proof.property}", proof)
        if proof.property in contradicted and record.is_proved:
            record = replace(record, verdict="unknown", reason=contradicted[proof.property])
        records.append(record)
    return tuple(records)


def _proof_certificate_of(cell_certificate: dict) -> dict:
    """The cells-exact record's proof certificate fields: none for a certificate that holds no claim."""
    if not cell_certificate["certified_cells"] + cell_certificate.get("certified_leaves", 0):
        return {}
    return {"proof_certificate": cell_certificate["file"], "proof_certificate_sha256": cell_certificate["sha256"]}


def _record(name: str, proof: Proof) -> VerdictRecord:
    """`proof` as a certificate record under the certificate's name for it (without the proof's evidence)."""
    return VerdictRecord(
        proof.verdict,
        proof.engine,
        proof.seconds,
        proof.reason,
        property=name,
        smt2=proof.smt2,
        smt2_sha256=proof.smt2_sha256,
    )


def _write_artifact(out: Path, spec, network, table, params: MachineParams, certificate, refinement=None) -> str:
    from certfsm import allowed_bitmasks, artifact_payload, write_artifact

    payload = artifact_payload(
        spec=spec.to_json(),
        model_sha256=network.sha256,
        edges=table.grid.edges,
        frac_bits=table.grid.frac_bits,
        proposal=table.proposal,
        exact=table.status == EXACT,
        allowed=allowed_bitmasks(table.allowed),
        conservative=params.conservative,
        confirm_cycles=params.confirm_cycles,
        cooldown_cycles=params.cooldown_cycles,
        overridable=params.overridable,
        codes=params.codes,
        certificate=certificate,
        created_by=f"certfsm {certfsm_version()}",
        refinement=refinement,
    )
    return write_artifact(out, payload)


def _write_leaves(path: Path, distillation: Distillation) -> None:
    """One JSON line per leaf of a refined cell in the table: cell, leaf (pre-order), exact box (per input low,
    high as exact rationals, closed), status, token, what decided it, and the witness pair or the reason."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in distillation.leaf_records:
            handle.write(json.dumps(record) + "\n")


def _write_cells(path: Path, distillation: Distillation, spec) -> None:
    """One JSON line per cell: status, token, what decided it, and the witness pair or the reason."""
    table, names = distillation.table, spec.outputs
    with open(path, "w", encoding="utf-8") as handle:
        for cell in range(table.n_cells):
            record = {
                "cell": cell,
                "bins": [int(b) for b in np.unravel_index(cell, table.grid.shape)],
                "status": "exact" if table.status[cell] == EXACT else "conservative",
                "token": names[int(table.proposal[cell])],
                "engine": str(distillation.engine_of_cell[cell]),
            }
            if cell in distillation.witnesses:
                record["witness"] = [[float(v) for v in x] for x in distillation.witnesses[cell]]
            if cell in distillation.reasons:
                record["reason"] = distillation.reasons[cell]
            handle.write(json.dumps(record) + "\n")
