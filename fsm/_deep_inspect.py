"""`certfsm inspect --deep`: re-prove an artifact from its own content and the model, trusting no report file.

The loader re-derives what needs no solver (`certfsm._artifact_trust`);
what is left needs the model and the solvers, and that is this module:

1. the model file's SHA-256 must be the artifact's ``model_sha256``
   (ModelError naming the file otherwise: the proofs below would be
   about another network);
2. every exact cell, and every exact leaf of a refined table, is
   re-proved against the model and every witness of the report
   re-validated (`_deep_cells`);
3. the table and machine SMT-LIB queries are regenerated from the
   artifact's own table and spec (`prove_table`, `prove_machine`, with
   the times the certificate records in the headers), solved with Z3,
   and each regenerated file must hash to what the certificate records;
   with a report folder, it must also equal the report's file byte for
   byte. The explicit-state enumeration runs again and must agree with
   Z3.

A rehashed edit the loader cannot see then fails here: an exact cell's
token swapped (the cell does not re-prove), the model hash swapped (step
1), a conservative cell relabelled exact (no proof), the spec changed
consistently where the table or machine queries read it (the
regenerated queries no longer hash as certified). What no step can see
is a spec edit that touches none of these (only a signature does).

`deep_inspect` is the library function; the CLI prints its lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from certfsm import ModelError, ReportError, load_artifact, load_onnx, spec_from_dict

from ._cell_problem import _problem
from ._deep_cells import CellFailure, WitnessCheck, reprove_exact_cells, reprove_exact_leaves, revalidate_witnesses
from ._explicit import alphabet, check_explicit, table_rows
from ._machine import MachineParams
from ._machine_proofs import disagreements, prove_machine
from ._pipeline import PROOF_GUARD_SECONDS, PROOF_RLIMIT
from ._table import CONSERVATIVE, EXACT, Table, prove_table

Progress = Callable[[int, int, str], None]
Stage = Callable[[str], None]


@dataclass(frozen=True)
class QueryCheck:
    """One regenerated SMT-LIB query: Z3's verdict on it, its hash against the certificate's, and the report's file.

    `report` is None without a report folder, else "same", or a phrase
    saying that the report's file is missing or where it first differs.
    """

    property: str
    file: str
    verdict: str
    sha256: str
    certified_sha256: str | None
    report: str | None = None

    @property
    def is_ok(self) -> bool:
        return self.verdict == "proved" and self.sha256 == self.certified_sha256 and self.report in (None, "same")

    def describe(self) -> str:
        if self.verdict != "proved":
            return f"{self.file}: z3 gives {self.verdict} on the query regenerated from the artifact"
        if self.sha256 != self.certified_sha256:
            return (
                f"{self.file}: the query regenerated from the artifact hashes to {self.sha256[:16]}... but the "
                f"certificate records {str(self.certified_sha256)[:16]}...: the artifact's table or spec is not "
                "the one the certificate's proof was about"
            )
        if self.report not in (None, "same"):
            return f"{self.file}: the report's file {self.report}"
        return f"{self.file}: regenerated, proved by z3, equal to the certified file"


@dataclass(frozen=True)
class DeepResult:
    """What `deep_inspect` re-proved, what failed, and how long each step took (seconds by step).

    `is_ok` holds only when every exact cell re-proved, every witness
    (with a report) re-validated, every regenerated query was proved and
    matched, and enumeration agreed; the CLI exits 0 exactly then.
    """

    artifact: Path
    model: Path
    model_sha256: str
    cells: int
    exact_proved: Counter
    cell_failures: tuple[CellFailure, ...]
    witnesses: WitnessCheck | None
    conservative: int
    queries: tuple[QueryCheck, ...]
    enumeration: tuple[str, ...]
    seconds: dict = field(default_factory=dict)
    leaves_proved: Counter | None = None
    """Exact leaves re-proved per engine; None for a flat table."""
    leaf_failures: tuple[CellFailure, ...] = ()

    @property
    def failures(self) -> tuple[str, ...]:
        """Every failure, one line each, cells first."""
        lines = [f"exact {f.describe()}" for f in (*self.cell_failures, *self.leaf_failures)]
        lines += [f"conservative {f.describe()}" for f in (self.witnesses.failures if self.witnesses else ())]
        lines += [q.describe() for q in self.queries if not q.is_ok]
        return tuple(lines + list(self.enumeration))

    @property
    def is_ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        exact = sum(self.exact_proved.values()) + len(self.cell_failures)
        engines = ", ".join(f"{n} by {e}" for e, n in sorted(self.exact_proved.items())) or "none"
        out = [
            f"deep: {self.model} has the artifact's model sha256 {self.model_sha256}",
            f"deep: exact cells re-proved against the model: {sum(self.exact_proved.values())} of {exact} "
            f"({engines}) in {self.seconds.get('cells', 0.0):.1f} s",
        ]
        if self.leaves_proved is not None:
            leaves = sum(self.leaves_proved.values()) + len(self.leaf_failures)
            by = ", ".join(f"{n} by {e}" for e, n in sorted(self.leaves_proved.items())) or "none"
            out.append(
                f"deep: exact leaves of the refined cells re-proved against the model: "
                f"{sum(self.leaves_proved.values())} of {leaves} ({by}) in {self.seconds.get('leaves', 0.0):.1f} s"
            )
        if self.witnesses is None:
            out.append(
                f"deep: conservative cells: {self.conservative}, each holding the conservative token; "
                "witnesses not re-validated (they live in the report's cells.jsonl: give the report folder "
                "with report=)"
            )
        else:
            w = self.witnesses
            out.append(
                f"deep: conservative cells: {self.conservative}; witness pairs re-validated exactly, in "
                f"float64 and in onnxruntime: {w.validated} of {w.claimed}; without a "
                f"witness (undecided or held back by the rules): {w.without_witness} "
                f"({self.seconds.get('witnesses', 0.0):.1f} s)"
            )
        proved = sum(q.verdict == "proved" for q in self.queries)
        matched = sum(q.is_ok for q in self.queries)
        where = "the certificate and the report's files" if any(q.report for q in self.queries) else "the certificate"
        out.append(
            f"deep: SMT-LIB queries regenerated from the artifact: {len(self.queries)}, proved by z3: {proved}, "
            f"equal to {where}: {matched}; enumeration agrees: {'yes' if not self.enumeration else 'no'} "
            f"({self.seconds.get('queries', 0.0):.1f} s)"
        )
        out += [f"  FAILED {line}" for line in self.failures[:20]]
        if len(self.failures) > 20:
            out.append(f"  ... and {len(self.failures) - 20} more failures")
        verdict = "ok: everything re-proved" if self.is_ok else f"FAILED: {len(self.failures)} item(s) did not re-prove"
        out.append(f"deep: {verdict} in {self.seconds.get('total', 0.0):.1f} s")
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines())


def deep_inspect(
    artifact_path,
    model_path,
    *,
    report=None,
    jobs: int | None = None,
    per_cell_timeout: float = 60.0,
    trusted_keys=None,
    progress: Progress | None = None,
    stage: Stage | None = None,
) -> DeepResult:
    """Re-prove the artifact at `artifact_path` against the ONNX model at `model_path` (see the module docstring).

    Raises ArtifactError when the loader refuses the artifact, ModelError
    when the model file is missing, unreadable or not the artifact's
    model, ReportError when `report` is not a distill report folder. A
    claim that does not re-prove is not raised: it is in the result's
    `failures`. `jobs` worker processes (default every core) share the
    cells; `per_cell_timeout` seconds for each cell that bounds alone
    cannot close.
    """
    started = time.monotonic()
    tell = stage or (lambda message: None)
    artifact_path, model_path = Path(artifact_path), Path(model_path)
    artifact = load_artifact(artifact_path, trusted_keys=trusted_keys)
    network = model_for_artifact(model_path, artifact)
    if report is not None and not Path(report).is_dir():
        raise ReportError(f"{report}: no such report folder; give the folder certfsm distill wrote with report=")
    spec = spec_from_dict(json.loads(json.dumps(artifact.spec)), artifact_path, require_model=False)
    problem = replace(_problem(spec, network), records_proofs=False)  # it re-proves; the proofs are not kept
    n_outputs = artifact.n_outputs
    allowed = (artifact.allowed.reshape(-1)[:, None] >> np.arange(n_outputs)) & 1
    table = Table(
        problem.grid,
        artifact.proposal.reshape(-1),
        np.where(artifact.exact.reshape(-1), EXACT, CONSERVATIVE),
        allowed.astype(bool),
    )
    seconds = {}
    witnesses = None
    if report is not None:
        clock = time.monotonic()
        tell("re-validating the report's witness pairs")
        witnesses = revalidate_witnesses(problem, table, report)
        seconds["witnesses"] = time.monotonic() - clock
    clock = time.monotonic()
    proved, cell_failures = reprove_exact_cells(
        problem, table, jobs=jobs or os.cpu_count() or 1, per_cell_timeout=per_cell_timeout, progress=progress
    )
    seconds["cells"] = time.monotonic() - clock
    leaves_proved, leaf_failures = None, []
    if artifact.refinement is not None:
        clock = time.monotonic()
        leaves_proved, leaf_failures = reprove_exact_leaves(
            problem,
            artifact.refinement,
            jobs=jobs or os.cpu_count() or 1,
            per_cell_timeout=per_cell_timeout,
            progress=progress,
        )
        seconds["leaves"] = time.monotonic() - clock
    clock = time.monotonic()
    tell("regenerating and solving the table and machine queries (z3)")
    queries, enumeration = _queries(artifact, spec, table, report)
    seconds["queries"] = time.monotonic() - clock
    seconds["total"] = time.monotonic() - started
    return DeepResult(
        artifact_path,
        model_path,
        artifact.model_sha256,
        table.n_cells,
        proved,
        tuple(cell_failures),
        witnesses,
        int(np.count_nonzero(table.status == CONSERVATIVE)),
        queries,
        enumeration,
        seconds,
        leaves_proved,
        tuple(leaf_failures),
    )


def model_for_artifact(model_path, artifact):
    """The network of the ONNX file at `model_path`, once its SHA-256 is the loaded `artifact`'s ``model_sha256``.

    Raises ModelError naming the file and both hashes otherwise (the
    CLI calls it before printing anything, so bad input is one line).
    """
    path, expected, artifact_path = Path(model_path), artifact.model_sha256, artifact.path
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ModelError(
            f"{path}: cannot read the model ({error.strerror or error}); give the ONNX model "
            f"{artifact_path} was distilled from with model_path="
        ) from None
    found = hashlib.sha256(data).hexdigest()
    if found != expected:
        raise ModelError(
            f"{path}: the model's sha256 is {found[:16]}... but {artifact_path} was distilled from a "
            f"model with sha256 {expected[:16]}...; give that model with model_path= (or the artifact "
            "was edited)"
        )
    network = load_onnx(path)
    if network.sha256 != expected:
        raise ModelError(f"{path}: the file changed while it was read; give a model file that is not being written")
    return network


def _queries(artifact, spec, table: Table, report) -> tuple[tuple[QueryCheck, ...], tuple[str, ...]]:
    """Regenerate, solve and compare every table and machine query; re-run the enumeration."""
    entries = {entry.property: entry for entry in artifact.certificate}
    params = MachineParams.from_spec(spec)
    with tempfile.TemporaryDirectory(prefix="certfsm-deep-") as scratch:
        folder = Path(scratch)
        budget = {"timeout": PROOF_GUARD_SECONDS, "rlimit": PROOF_RLIMIT}  # the budget distill proves under
        leaves = artifact.refinement
        table_proofs = prove_table(table, spec, folder, refinement=leaves, **budget)
        machine_proofs = prove_machine(params, table, folder, refinement=leaves, **budget)
        checks = []
        for proof in (*table_proofs, *machine_proofs):
            name = proof.property if proof.property.startswith("table-") else f"machine-{proof.property}"
            file = proof.smt2
            entry = entries.get(name)
            checks.append(
                QueryCheck(
                    name,
                    file,
                    proof.verdict,
                    proof.smt2_sha256,
                    entry.smt2_sha256 if entry is not None and entry.smt2 == file else None,
                    None if report is None else _compare(folder / file, Path(report) / file),
                )
            )
    explicit = check_explicit(params, alphabet(params, table_rows(table)))
    enumeration = [f"enumeration-{p.property}: {p.verdict} ({p.reason})" for p in explicit if p.verdict != "proved"]
    enumeration += [f"z3 and enumeration disagree: {line}" for line in disagreements(machine_proofs, explicit)]
    return tuple(checks), tuple(enumeration)


def _compare(regenerated: Path, reported: Path) -> str:
    """What the report's copy of a regenerated file is: "same", missing, or where it first differs."""
    try:
        theirs = reported.read_bytes()
    except OSError:
        return f"{reported} is missing"
    ours = regenerated.read_bytes()
    if theirs == ours:
        return "same"
    at = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    line = ours[:at].count(b"\n") + 1
    return f"{reported} differs from the query regenerated from the artifact at byte {at} (line {line})"
