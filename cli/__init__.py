"""The `certfsm` command line.

Exit codes: 0 when everything asked for is proved (or the check passed),
1 when something is violated or unknown, 2 for bad usage or bad input
(one line naming the file, field or node and the fix; a traceback only
with --debug), and for recheck alone 3 when no file is contradicted but
some could not be confirmed (`EXIT_UNCONFIRMED`); vnnlib-batch exits 1 only when an answer contradicts a known one
of its list (a batch is a run over many instances, most of them not proved). Heavy modules are imported inside the commands so that
`certfsm --help` is instant.
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
import re
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import typer

from certfsm import ArtifactError, CertfsmError, EngineError, UsageError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_UNCONFIRMED = 3
"""recheck only: nothing contradicted, but some file not confirmed (its solver timed out, answered unknown or
failed); distinct from 0 so that an auditor tells "all confirmed" from it by the exit code alone, and non-zero so
that a CI step that only tests for success still stops."""
ENGINE_HELP = "auto | marabou | z3 | both | bounds"
"""--engine's help, written out so that the CLI starts without importing the verifier; a test holds it to
the engine registry (certfsm.verify._engines, tests/verify/test_engine_registry.py)."""

RAY_HELP = (
    "Run the workers on Ray: auto (this machine's Ray, started for the command when none runs) or a cluster's "
    'address (HOST:PORT); default: local worker processes. Needs pip install "certfsm[ray]".'
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="certfsm: prove a neural controller safe, distil it into a certified state machine, run it.",
)
spec_app = typer.Typer(no_args_is_help=True, help="Work with controller spec files.")
app.add_typer(spec_app, name="spec")
audit_app = typer.Typer(no_args_is_help=True, help="Check and export audit logs written by certfsm run.")
app.add_typer(audit_app, name="audit")

_state = {"debug": False}


def _show_version(value: bool) -> None:
    if value:
        from certfsm import certfsm_version

        typer.echo(f"certfsm {certfsm_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="Show a full traceback on errors."),
    show_version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the certfsm version and exit."
    ),
) -> None:
    _state["debug"] = debug


def _jobs(jobs: Optional[int]) -> int:
    """--jobs as given (at least 1), or every core when it is left out."""
    if jobs is None:
        return os.cpu_count() or 1
    if jobs < 1:
        raise UsageError(
            f"--jobs {jobs} is not a number of worker processes; give --jobs 1 or more, "
            "or leave it out to use every core"
        )
    return jobs


def _ray_option():
    """--ray, shared by every command with --jobs; $CERTFSM_RAY gives it when the flag is left out."""
    return typer.Option(None, "--ray", metavar="auto|ADDRESS", envvar="CERTFSM_RAY", show_envvar=True, help=RAY_HELP)


@contextlib.contextmanager
def _workers_on(ray: Optional[str], *preload: str):
    """Inside, the command's pools run on Ray at `ray` (None: local processes), whose workers import `preload`
    at once; its errors name --ray."""
    from certfsm.verify import ray_workers

    with _in_flags(ray="--ray"), ray_workers(ray or None, preload=preload):
        yield


def _seconds(flag: str, value: float) -> float:
    """A time budget flag: a finite number of seconds above zero."""
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} {value:g} is not a positive number of seconds; give e.g. {flag} 60")
    return value


def _flag_words(text: str, flags: dict[str, str]) -> str:
    """`text` from the library with each parameter of `flags` it names written as its flag, as the user typed it.

    The library names a parameter as Python does (see `certfsm._errors`):
    ``report=`` becomes ``--report``, ``probe='trace:a.csv'`` becomes
    ``--probe trace:a.csv`` (a string value as the shell takes it),
    ``port=0`` becomes ``--metrics-port 0``, and a switch's ``check=True`` becomes ``--check``.
    """
    if not flags:
        return text
    named = re.compile(
        r"(?<![\w.])(" + "|".join(map(re.escape, flags)) + r")="
        r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|True\b)?"
    )

    def as_flag(match: re.Match) -> str:
        name, quoted = match.groups()
        if quoted == "True":
            return flags[name]
        if quoted is not None:
            return f"{flags[name]} {shlex.quote(ast.literal_eval(quoted))}"
        after = text[match.end() : match.end() + 1]
        return flags[name] + (" " if after and not after.isspace() and after not in ",;)" else "")

    return named.sub(as_flag, text)


@contextlib.contextmanager
def _in_flags(**flags: str):
    """Inside, a certfsm error that names a parameter of `flags` (``report=``) names its flag (``--report``) instead:
    the library's check stays the one definition, and the command names what the user typed."""
    try:
        yield
    except CertfsmError as error:
        error.args = (_flag_words(str(error), flags),)
        raise


def _example_spec(name: str) -> Path:
    from certfsm.examples import example_spec_path

    return example_spec_path(name)


class _Progress:
    """A rich progress bar on stderr, one row per property; silent when `enabled` is False."""

    def __init__(self, labels: list[str], enabled: bool):
        self.labels, self.enabled, self.tasks = labels, enabled, {}
        self.bar = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description:<34}"),
                BarColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.bar.__enter__()
            for index, label in enumerate(self.labels):
                self.tasks[index] = self.bar.add_task(label[:34], total=1.0, note="waiting")
        return self

    def update(self, index: int, fraction: float, message: str) -> None:
        if self.bar is not None and index in self.tasks:
            self.bar.update(self.tasks[index], completed=min(max(fraction, 0.0), 1.0), note=message[:40])

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)


@app.command()
def verify(
    spec: Optional[Path] = typer.Argument(None, help="Controller spec (JSON). Omit with --example."),
    example: bool = typer.Option(False, "--example", help="Verify the embedded example controller."),
    example_name: str = typer.Option("coadapt", help="Which shipped example: coadapt or coadapt_unsafe."),
    report: Path = typer.Option(Path("certfsm-report"), "--report", help="Report folder to (re)write."),
    engine: str = typer.Option("auto", help=ENGINE_HELP),
    timeout: float = typer.Option(60.0, help="Seconds per property."),
    jobs: Optional[int] = typer.Option(None, help="Worker processes (default: all cores)."),
    ray: Optional[str] = _ray_option(),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Prove the spec's token range and legality rules (plain and gated) and write a report folder."""
    from certfsm import load_spec
    from certfsm.verify import InputNaming, spec_properties, verify_spec, write_report

    spec_path = _spec_argument(spec, example, example_name)
    _check_engine(engine)
    jobs, timeout = _jobs(jobs), _seconds("--timeout", timeout)
    controller = load_spec(spec_path)
    labels = [p.name for p in spec_properties(controller)]
    with _workers_on(ray), _Progress(labels, progress and sys.stderr.isatty()) as bar:
        run = verify_spec(controller, engine=engine, timeout=timeout, jobs=_jobs(jobs), on_progress=bar.update)
    with _in_flags(folder="--report"):
        summary = write_report(
            report,
            title=controller.name,
            network=run.network,
            properties=run.properties,
            results=run.results,
            naming=InputNaming.from_spec(controller),
            spec_path=spec_path,
            settings={"engine": engine, "timeout": timeout, "jobs": _jobs(jobs)},
        )
    _print_results(run)
    typer.echo(f"overall: {summary['overall']}; report written to {report}/")
    raise typer.Exit(EXIT_OK if summary["overall"] == "proved" else EXIT_FAILED)


def _refine_budget(text: str):
    """--refine DEPTH,LEAVES as the core's TreeBudget, refused in the flag's words."""
    from certfsm import TreeBudget

    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise typer.BadParameter(f"--refine {text!r} is not DEPTH,LEAVES; give e.g. --refine 8,64")
    depth, leaves = (int(p) for p in parts)
    return TreeBudget(depth, leaves)


def _distill_flags(out: Path, samples: int) -> None:
    """Refuse a bad --out or --samples of distill in the flags' words, before any work (the library refuses the
    same values in its own words: out=, samples=)."""
    from certfsm import ARTIFACT_SUFFIX
    from certfsm.fsm import CROSS_CHECK_SAMPLES

    if out.suffix != ARTIFACT_SUFFIX:
        raise UsageError(
            f"--out {out}: an artifact file name ends in {ARTIFACT_SUFFIX}; give e.g. "
            f"--out {out.with_suffix(ARTIFACT_SUFFIX).name}"
        )
    if samples < CROSS_CHECK_SAMPLES:
        raise UsageError(
            f"--samples {samples!r}: the cross-check needs at least {CROSS_CHECK_SAMPLES} random "
            f"inputs; give --samples {CROSS_CHECK_SAMPLES} or more"
        )


def _spec_argument(spec: Optional[Path], example: bool, example_name: str) -> Path:
    if example and spec is not None:
        raise UsageError("give either SPEC or --example, not both")
    if example:
        return _example_spec(example_name)
    if spec is None:
        raise UsageError("missing SPEC; give a controller spec file or --example")
    if spec.suffix.lower() == ".onnx":
        raise UsageError(
            f"SPEC {spec} is an ONNX model, not a controller spec; give the spec JSON whose "
            '"model" field names it (see certfsm/examples/*.spec.json), or --example'
        )
    return spec


def _check_engine(engine: str) -> None:
    """Refuse an unknown --engine, or one whose solver is not installed, before any work."""
    from certfsm.verify import ENGINES, engines_needed, is_installed, missing_solver

    if engine not in ENGINES:
        raise UsageError(f"--engine {engine} is not one of {', '.join(ENGINES)}; give e.g. --engine auto")
    for name in engines_needed(engine):
        if not is_installed(name):
            raise EngineError(missing_solver(name, f"--engine {engine}", "--engine auto"))


def _print_results(run) -> None:
    width = max([len(p.name) for p in run.properties] + [8])
    for prop, result in zip(run.properties, run.results):
        line = f"{prop.name:<{width}}  {result.verdict:<8}  {result.engine:<15} {result.seconds:8.3f} s"
        if result.reason and (result.verdict != "proved" or result.stats.get("cross_checked") is False):
            line += f"  ({result.reason})"
        typer.echo(line)


@app.command()
def vnnlib(
    network: Path = typer.Argument(..., help="ONNX network."),
    prop: Path = typer.Argument(..., metavar="PROPERTY", help="VNN-LIB property (the unsafe set)."),
    timeout: float = typer.Option(116.0, help="Seconds for the whole instance."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the VNN-COMP result file here."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write a report folder."),
    engine: str = typer.Option("auto", help=ENGINE_HELP),
    jobs: Optional[int] = typer.Option(None, help="Worker processes (default: all cores)."),
    ray: Optional[str] = _ray_option(),
    progress: bool = typer.Option(True, help="Show a progress bar (on a terminal)."),
    certificate: Optional[Path] = typer.Option(
        None, "--certificate", help="On unsat, write the proof certificate here (check it with certfsm check-proof)."
    ),
) -> None:
    """Check a VNN-LIB property VNN-COMP style: prints (and writes) unsat, sat with a witness, timeout or unknown."""
    from certfsm.verify import InputNaming, verify_vnnlib, vnncomp_result, write_report

    _check_engine(engine)
    jobs, timeout = _jobs(jobs), _seconds("--timeout", timeout)
    with _workers_on(ray), _Progress([prop.stem], progress and sys.stderr.isatty()) as bar:
        run = verify_vnnlib(
            network,
            prop,
            engine=engine,
            timeout=timeout,
            jobs=_jobs(jobs),
            on_progress=lambda box, fraction, message: bar.update(0, fraction, message),
        )
    answer, text = vnncomp_result(run)
    if out is not None:
        from certfsm import write_atomically

        write_atomically(
            out,
            (text if text.endswith("\n") else text + "\n").encode(),
            what="result",
            fix="choose a writable --out path",
            make_parents=True,
        )
    if report is not None:
        with _in_flags(folder="--report"):
            write_report(
                report,
                title=f"{network.name} / {prop.name}",
                network=run.network,
                properties=run.properties,
                results=run.results,
                naming=InputNaming.plain(run.network.n_inputs, run.network.n_outputs),
                settings={"engine": engine, "timeout": timeout, "jobs": _jobs(jobs)},
            )
    if certificate is not None and answer == "unsat":
        from certfsm.verify import write_certificate

        written = write_certificate(certificate, run.network, run.properties, run.results)
        typer.echo(f"certificate: {certificate} ({written})" if written else "certificate: none recorded", err=True)
    typer.echo(text.rstrip("\n"))
    for prop_box, result in zip(run.properties, run.results):
        if result.verdict == "unknown" or result.stats.get("cross_checked") is False:
            typer.echo(f"{prop_box.name}: {result.verdict} ({result.reason})", err=True)
    raise typer.Exit(EXIT_OK if answer == "unsat" else EXIT_FAILED)


@app.command("vnnlib-batch")
def vnnlib_batch(
    instances: Path = typer.Argument(
        ..., metavar="INSTANCES.csv", help="VNN-COMP instance list: onnx,vnnlib,timeout per row (paths relative to it)."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Results csv: one row per instance as it finishes; an existing one is resumed."
    ),
    witnesses: Optional[Path] = typer.Option(
        None, "--witnesses", help="Folder for the sat instances' VNN-COMP result files (default: OUT's stem.witnesses)."
    ),
    timeout_cap: Optional[float] = typer.Option(
        None, "--timeout-cap", help="Seconds at most per instance, whatever the list says."
    ),
    engine: str = typer.Option("auto", help=ENGINE_HELP),
    jobs: Optional[int] = typer.Option(None, help="Instances checked at once (default: all cores)."),
    ray: Optional[str] = _ray_option(),
    in_list_order: bool = typer.Option(
        False, "--sorted", help="At the end, rewrite the results file with its rows in the list's order."
    ),
    progress: bool = typer.Option(
        True, help="Show a progress bar on a terminal, else a progress line on stderr every few seconds."
    ),
) -> None:
    """Check every instance of a VNN-COMP instance list as certfsm vnnlib does, resumably: exit 1 on a wrong answer.

    A row per instance goes to --out as it finishes (flushed to disk); a second run with the same --out checks only
    the instances it does not hold yet. Exit 0 when no answer contradicts a known one of the list (its expected
    column), 1 when one does, 2 on bad input.
    """
    from certfsm.verify import run_batch

    _check_engine(engine)
    jobs = _jobs(jobs)
    cap = None if timeout_cap is None else _seconds("--timeout-cap", timeout_cap)

    def tell_row(row, done: int, total: int) -> None:
        line = f"{row.verdict:<8} {row.seconds:8.2f} s  {row.onnx}  {row.vnnlib}"
        if row.witness:
            line += f"  witness {row.witness}"
        elif row.reason and row.verdict != "unsat":
            line += f"  ({row.reason[:160]})"
        typer.echo(line)
        bar.update(done, total, f"last: {row.verdict} in {row.seconds:.1f} s")

    def tell_start(total: int, skipped: int) -> None:
        bar.update(0, total, f"started, up to {jobs} at once" + (f"; {skipped} already in {out}" if skipped else ""))

    def tell_warning(message: str) -> None:
        typer.echo(f"certfsm: warning: {message}", err=True)

    with (
        _in_flags(out="--out", witnesses="--witnesses"),
        _workers_on(ray, "onnx", "onnxruntime", "z3"),
        _CellProgress(
            progress and sys.stderr.isatty(),
            "vnnlib-batch",
            plain=progress and not sys.stderr.isatty(),
            unit="instances",
        ) as bar,
    ):
        batch = run_batch(
            instances,
            out,
            witnesses=witnesses,
            engine=engine,
            jobs=jobs,
            timeout_cap=cap,
            in_list_order=in_list_order,
            on_start=tell_start,
            on_row=tell_row,
            on_warning=tell_warning,
        )
    summary = batch.summary
    if batch.skipped:
        typer.echo(f"resumed: {batch.skipped} instances already in {out}, not run again")
    counts = ", ".join(f"{verdict} {n}" for verdict, n in summary.counts.items() if n)
    typer.echo(
        f"{len(summary.seconds)} instances: {counts or 'none'}; instance time {summary.total_seconds:.1f} s in all, "
        f"median {summary.median_seconds:.2f} s; this run {len(batch.added)} instances in "
        f"{batch.wall_seconds:.1f} s wall, {batch.jobs} job{'s' if batch.jobs != 1 else ''}"
    )
    if summary.missing:
        typer.echo(f"{len(summary.missing)} instances of the list have no row yet; run the same command again")
    if summary.scored:
        typer.echo(f"known answers: {summary.scored} compared, {len(summary.wrong)} wrong")
    for row, expected in summary.wrong:
        typer.echo(f"WRONG: {row.onnx} {row.vnnlib}: answered {row.verdict}, the known answer is {expected}")
    typer.echo(f"results: {out}" + (f"; witnesses: {batch.witnesses}/" if summary.counts["sat"] else ""))
    raise typer.Exit(EXIT_FAILED if summary.wrong else EXIT_OK)


@app.command("check-proof")
def check_proof(
    cert: Optional[Path] = typer.Argument(None, metavar="CERT", help="A proof certificate (.cert.json)."),
    model: Optional[Path] = typer.Option(None, "--model", help="The ONNX model the certificate is about."),
    report: Optional[Path] = typer.Option(None, "--report", help="Check every certificate of this report folder."),
) -> None:
    """Re-check proof certificates with the independent checker (certfsm.checker), without re-proving.

    Exit 0 when every certificate checks, 1 when one fails (the line names the first failing leaf), 2 on bad input.
    """
    from certfsm.checker import CertificateError, check_certificate, check_report

    if (report is None) == (cert is None) or (cert is not None and model is None):
        raise UsageError("check-proof takes CERT --model M.onnx, or --report DIR; give one of the two")
    try:
        results = check_report(report) if report is not None else [check_certificate(cert, model)]
    except CertificateError as error:
        raise UsageError(str(error)) from None
    for result in results:
        verdict = f"checked ({result.leaves} leaves)" if result.ok else f"FAILED: {result.failure}"
        typer.echo(f"{result.certificate}: {verdict} in {result.seconds:.2f} s")
    raise typer.Exit(EXIT_OK if all(r.ok for r in results) else EXIT_FAILED)


@app.command()
def recheck(
    folder: Path = typer.Argument(..., help="A report folder written by certfsm verify, vnnlib or distill."),
    solver: str = typer.Option("z3", help="z3 | cvc5"),
    timeout: float = typer.Option(60.0, help="Seconds per file (z3 takes whole seconds: at least 1)."),
) -> None:
    """Re-run every .smt2 file of a report with a stock SMT solver and compare with the recorded status.

    Each file is confirmed, unconfirmed (the solver timed out, answered unknown or failed: nothing contradicts the
    file, nothing confirms it), MISMATCH (the solver answered sat where the file records unsat, or the reverse) or
    INVALID (changed since the report was written, missing, unlisted, or without a status). Exit 0 when every file is
    confirmed, 1 when any is MISMATCH or INVALID, 3 when some are unconfirmed and none is MISMATCH or INVALID.
    """
    from certfsm.verify import RECHECK_OUTCOMES, recheck_folder

    with _in_flags(solver="--solver", timeout="--timeout"):
        rows = recheck_folder(folder, solver=solver, timeout=_seconds("--timeout", timeout))
    for row in rows:
        typer.echo(
            f"{row.file:<48} recorded {row.recorded_status:<8} {solver} {row.answer:<8} "
            f"{row.seconds:7.2f} s  {row.label}" + (f"  ({row.note})" if row.note else "")
        )
    counts = {outcome: sum(row.outcome == outcome for row in rows) for outcome in RECHECK_OUTCOMES}
    typer.echo(
        f"{counts['confirmed']} of {len(rows)} files confirmed by {solver}, {counts['unconfirmed']} unconfirmed, "
        f"{counts['mismatch']} mismatched, {counts['invalid']} invalid"
    )
    if counts["mismatch"] or counts["invalid"]:
        raise typer.Exit(EXIT_FAILED)
    raise typer.Exit(EXIT_UNCONFIRMED if counts["unconfirmed"] else EXIT_OK)


@app.command()
def distill(
    spec: Optional[Path] = typer.Argument(None, help="Controller spec (JSON). Omit with --example."),
    out: Path = typer.Option(..., "--out", help="Artifact file to (re)write, ending in .cfsm."),
    report: Path = typer.Option(Path("certfsm-distill-report"), "--report", help="Report folder to (re)write."),
    example: bool = typer.Option(False, "--example", help="Distil the embedded example controller."),
    example_name: str = typer.Option("coadapt", help="Which shipped example: coadapt or coadapt_unsafe."),
    jobs: Optional[int] = typer.Option(None, help="Worker processes (default: all cores)."),
    ray: Optional[str] = _ray_option(),
    timeout: Optional[float] = typer.Option(
        None,
        help="Wall-clock guard per cell in seconds (default: none, the work budget alone ends each cell); "
        "when it fires first the run stops, writes no artifact and keeps the checkpoint.",
    ),
    checkpoint: Optional[Path] = typer.Option(
        None,
        help="Resume from and append to this checkpoint file (default: OUT.checkpoint beside --out, "
        "resumed by the same command and removed once the artifact is written).",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 when cells are held back by the legality rules or undecided."
    ),
    seed: int = typer.Option(0, help="Seed of the samples, the falsifiers and the cross-check."),
    samples: int = typer.Option(100_000, help="Random inputs of the cross-check (at least 100000)."),
    decision_map: Optional[list[str]] = typer.Option(
        None, "--map", metavar="X,Y", help="Draw the decision map over inputs X and Y (repeatable)."
    ),
    progress: bool = typer.Option(
        True, help="Show a progress bar on a terminal, else a progress line on stderr every few seconds."
    ),
    sign: Optional[Path] = typer.Option(
        None, "--sign", metavar="KEY", help="Sign the artifact with this private key (from certfsm keygen)."
    ),
    refine: Optional[str] = typer.Option(
        None,
        "--refine",
        metavar="DEPTH,LEAVES",
        help="Refine every cell that is not exact into a tree at most DEPTH splits deep with at most LEAVES "
        "leaves (replaces the spec's refine object).",
    ),
) -> None:
    """Distil the network into a certified lookup-table state machine: artifact plus report folder."""
    from certfsm import load_spec
    from certfsm.fsm import distill_controller

    spec_path = _spec_argument(spec, example, example_name)
    signer = None
    if sign is not None:  # read the key before the distillation, so a bad key costs no solver time
        from certfsm import load_private_key

        signer = load_private_key(sign)
    jobs = _jobs(jobs)
    timeout = None if timeout is None else _seconds("--timeout", timeout)
    _distill_flags(out, samples)
    controller = load_spec(spec_path)
    pairs = tuple(_input_pair(text) for text in decision_map or ())
    with (
        _in_flags(
            out="--out", report="--report", checkpoint="--checkpoint", per_cell_timeout="--timeout", samples="--samples"
        ),
        _workers_on(ray, "certfsm.fsm"),
        _CellProgress(progress and sys.stderr.isatty(), plain=progress and not sys.stderr.isatty()) as bar,
    ):
        run = distill_controller(
            controller,
            out=out,
            report=report,
            jobs=_jobs(jobs),
            per_cell_timeout=timeout,
            checkpoint=checkpoint,
            seed=seed,
            samples=samples,
            maps=pairs or None,
            progress=bar.update,
            stage=bar.stage,
            strict=strict,
            refine=None if refine is None else _refine_budget(refine),
        )
    fidelity, cross = run.summary["fidelity"], run.cross_check
    typer.echo(
        f"cells: {fidelity['cells']}; exact {fidelity['exact']} ({100 * fidelity['exact_share']:.1f}%), "
        f"conservative {fidelity['conservative_with_witness']} (with a witness), "
        f"held back {fidelity['held_back_by_rules']}, undecided {fidelity['undecided']}; "
        f"{run.distillation.seconds:.1f} s"
    )
    typer.echo(f"cross-check: {cross['mismatches']} mismatches in {cross['samples']} random inputs")
    if fidelity["held_back_by_rules"]:
        typer.echo(
            f"warning: the network breaks the legality rules in {fidelity['held_back_by_rules']} cells ("
            + ", ".join(f"{t} in {n}" for t, n in fidelity["held_back_by_token"].items())
            + "); the table holds the conservative token there"
        )
    for entry in run.certificate:
        if not entry.is_proved:
            typer.echo(f"{entry.property}: {entry.verdict} ({entry.engine})")
    state = "certified" if run.certified else "NOT certified (the runtime will refuse it)"
    signed = ""
    if signer is not None:
        from certfsm import sign_artifact

        signed = f"; signed by {sign_artifact(out, signer).key_id}"
    typer.echo(f"{out}: {state}; sha256 {run.artifact_sha256}{signed}; report written to {report}/")
    if strict and run.shortfalls:
        typer.echo(f"--strict: not the whole network: {'; '.join(run.shortfalls)}; exit code 1")
    raise typer.Exit(EXIT_OK if run.succeeded else EXIT_FAILED)


def _input_pair(text: str) -> tuple[str, str]:
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UsageError(
            f"--map {text!r} is not two input names separated by a comma; give e.g. --map temperature,compute_util"
        )
    return parts[0], parts[1]


class _CellProgress:
    """A rich progress bar over cells (or another `unit`) on stderr, then one line per later step; silent when not
    `enabled`.

    With `plain` (stderr is not a terminal: a pipe, a CI log) no bar but a
    plain line on stderr every `PLAIN_SECONDS` and at each phase change (the
    message's words before its first colon), then one line per later step:

        distilling [5m52s] 99852/100000 cells; engines: 148 hard cells left, 61.3% exact so far, about 4 min left

    A hard cell can take minutes without a new message, so a ticker thread
    repeats the last line, with the time advanced, once `PLAIN_SECONDS` pass
    without one: a CI log never falls silent while the run lives.
    """

    PLAIN_SECONDS = 5.0

    def __init__(self, enabled: bool, label: str = "distilling", *, plain: bool = False, unit: str = "cells"):
        self.enabled, self.label, self.bar, self.task, self.unit = enabled, label, None, None, unit
        self.plain, self.started, self.shown, self.phase = plain and not enabled, time.monotonic(), None, None
        self.last, self.lock, self.stopped, self.ticker = None, threading.Lock(), threading.Event(), None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn(self.label),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
            )
            self.bar.__enter__()
            self.task = self.bar.add_task(self.unit, total=None, note="")
        if self.plain:
            self.ticker = threading.Thread(target=self._tick, name="certfsm-progress", daemon=True)
            self.ticker.start()
        return self

    def _tick(self) -> None:
        while not self.stopped.wait(self.PLAIN_SECONDS / 5):
            with self.lock:
                if self.last is not None and time.monotonic() - self.shown >= self.PLAIN_SECONDS:
                    self._line(self.last)

    def update(self, done: int, total: int, message: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, note=message)
        if self.plain:
            now, phase = time.monotonic(), message.split(":", 1)[0]
            with self.lock:
                self.last = f"{done}/{total} {self.unit}; {message}"
                if self.shown is None or now - self.shown >= self.PLAIN_SECONDS or phase != self.phase or done == total:
                    self.phase = phase
                    self._line(self.last)

    def stage(self, message: str) -> None:
        if self.bar is not None:
            self.bar.console.print(message)
        if self.plain:
            with self.lock:
                self.last = message
                self._line(message)

    def _line(self, text: str) -> None:
        """Print one plain line (the caller holds the lock)."""
        self.shown = time.monotonic()
        elapsed = int(self.shown - self.started)
        print(f"{self.label} [{elapsed // 60}m{elapsed % 60:02d}s] {text}", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        self.stopped.set()
        if self.ticker is not None:
            self.ticker.join()
        if self.bar is not None:
            self.bar.__exit__(*exc)


@app.command()
def keygen(
    out: Path = typer.Option(
        ..., "--out", metavar="KEY", help="Private key file to create (mode 0600); the public key goes to KEY.pub."
    ),
) -> None:
    """Make an Ed25519 key pair for signing artifacts; never overwrites an existing key."""
    from certfsm import generate_key_pair

    with _in_flags(out="--out"):
        public = generate_key_pair(out)
    typer.echo(f"{out}: private key (keep it secret); {public.source}: public key; key id {public.key_id}")


@app.command()
def sign(
    artifact: Path = typer.Argument(..., help="A .cfsm artifact to sign in place."),
    key: Path = typer.Option(..., "--key", metavar="KEY", help="Private key file written by certfsm keygen."),
) -> None:
    """Sign an existing artifact (rewritten atomically; its payload and hash do not change)."""
    from certfsm import sign_artifact

    signature = sign_artifact(artifact, key)
    typer.echo(f"{artifact}: signed by {signature.key_id} ({signature.algorithm})")


@app.command()
def inspect(
    artifact: Path = typer.Argument(..., help="A .cfsm artifact."),
    report: Optional[Path] = typer.Option(
        None, "--report", help="The distill report folder: also check its SMT-LIB file hashes."
    ),
    trust: Optional[list[Path]] = typer.Option(
        None,
        "--trust",
        metavar="PUB",
        help="A trusted public key (KEY.pub, repeatable): the artifact must be signed by one of them.",
    ),
    deep: bool = typer.Option(
        False,
        "--deep",
        help="Re-prove the artifact from its content and --model: every exact "
        "cell, every witness of --report, every table and machine query.",
    ),
    model: Optional[Path] = typer.Option(
        None, "--model", metavar="M.onnx", help="The ONNX model the artifact was distilled from (with --deep)."
    ),
    jobs: Optional[int] = typer.Option(None, help="Worker processes for --deep (default: all cores)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", metavar="auto|ADDRESS", envvar="CERTFSM_RAY", show_envvar=True, help=f"With --deep: {RAY_HELP}"
    ),
    timeout: float = typer.Option(
        60.0,
        help="Seconds per cell that bounds alone cannot close (with --deep; a "
        "timeout fails the cell, so the default is generous).",
    ),
    progress: bool = typer.Option(True, help="Show a progress bar (with --deep)."),
) -> None:
    """Show what an artifact holds and which proofs back it; exit 0 only when its hash and certificate check out
    (with --deep, only when the artifact also re-proves against its model)."""
    from certfsm import inspect_artifact

    if deep and model is None:
        raise UsageError(
            "--deep re-proves the artifact against its model; give --model M.onnx, the ONNX model it was distilled from"
        )
    if model is not None and not deep:
        raise UsageError("--model is read only by --deep; add --deep or leave --model out")
    flags = {"report": "--report", "trusted_keys": "--trust", "model_path": "--model", "per_cell_timeout": "--timeout"}
    inspection = inspect_artifact(artifact, report=report, trusted_keys=trust or None)
    not_an_artifact = next(
        (c for c in inspection.checks if not c.passed and c.name in ("file", "JSON", "format")), None
    )
    if not_an_artifact is not None:
        raise ArtifactError(not_an_artifact.detail)
    if deep and inspection.artifact is not None:
        from certfsm.fsm import model_for_artifact

        with _in_flags(**flags):
            model_for_artifact(model, inspection.artifact)
    for line in inspection:
        typer.echo(_flag_words(line, flags))
    if not deep:
        raise typer.Exit(EXIT_OK if inspection.is_ok else EXIT_FAILED)
    if not inspection.is_ok:
        typer.echo("deep: not run: the artifact fails the checks above")
        raise typer.Exit(EXIT_FAILED)
    from certfsm.fsm import deep_inspect

    with (
        _in_flags(**flags),
        _workers_on(ray, "certfsm.fsm"),
        _CellProgress(progress and sys.stderr.isatty(), "re-proving exact cells") as bar,
    ):
        result = deep_inspect(
            artifact,
            model,
            report=report,
            jobs=_jobs(jobs),
            per_cell_timeout=_seconds("--timeout", timeout),
            trusted_keys=trust or None,
            progress=bar.update,
            stage=bar.stage,
        )
    for line in result:
        typer.echo(_flag_words(line, flags))
    raise typer.Exit(EXIT_OK if result.is_ok else EXIT_FAILED)


@app.command()
def run(
    artifact: Path = typer.Argument(..., help="A certified .cfsm artifact."),
    probe: str = typer.Option(
        ...,
        "--probe",
        help="linux, trace:FILE.csv (columns named after the inputs), or example-trace (the example's recorded trace).",
    ),
    steps: Optional[int] = typer.Option(None, "--steps", help="Stop after this many cycles."),
    period_ms: float = typer.Option(0.0, "--period-ms", help="Milliseconds per cycle (0: as fast as possible)."),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="Per-input scale and offset (JSON)."),
    audit: Optional[Path] = typer.Option(None, "--audit", help="Append every decision to this audit log (new file)."),
    fsync_every: int = typer.Option(1000, "--fsync-every", help="fsync the audit log every N records (1: each)."),
    metrics_port: Optional[int] = typer.Option(
        None,
        "--metrics-port",
        help="Serve Prometheus counters at http://127.0.0.1:N/metrics (needs the metrics extra: prometheus-client).",
    ),
) -> None:
    """Run a certified controller against live probes or a recorded trace; SIGHUP reloads, SIGINT/SIGTERM stop."""
    from certfsm.runtime import run_artifact

    with _in_flags(
        steps="--steps", period_ms="--period-ms", fsync_every="--fsync-every", port="--metrics-port", probe="--probe"
    ):
        done = run_artifact(
            artifact,
            probe,
            steps=steps,
            period_ms=period_ms,
            calibration=calibration,
            audit=audit,
            fsync_every=fsync_every,
            metrics_port=metrics_port,
        )
    summary = done.summary
    typer.echo(f"{summary.steps} cycles; tokens: " + ", ".join(f"{t} {n}" for t, n in summary.tokens.most_common()))
    typer.echo("reasons: " + ", ".join(f"{r} {n}" for r, n in summary.reasons.most_common()))
    for old, new in summary.swaps:
        typer.echo(f"hot swap: {old[:12]} -> {new[:12]}")
    if summary.refused_reloads:  # each was told on stderr when it happened
        typer.echo(f"reloads refused: {len(summary.refused_reloads)}; the machine in force kept running", err=True)
    if done.audit_head is not None:
        typer.echo(f"audit log {audit}: {done.audit_records} records, head {done.audit_head[:16]}")


@audit_app.command("verify")
def audit_verify(log: Path = typer.Argument(..., help="An audit log (its first file, or its folder).")) -> None:
    """Check the log's SHA-256 chain; exit 0 only for an intact log, else name the first bad record."""
    from certfsm.runtime import verify_log

    verification = verify_log(log)
    typer.echo(verification.describe())
    raise typer.Exit(EXIT_OK if verification.ok else EXIT_FAILED)


@audit_app.command("export")
def audit_export(
    log: Path = typer.Argument(..., help="An audit log."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write JSON Lines here (default: stdout)."),
    artifact: Optional[Path] = typer.Option(
        None, "--artifact", help="The logged artifact, to write each token's name (token_name) beside its index."
    ),
) -> None:
    """The log as JSON Lines: a header line per file, a line per record (reason and token names beside their
    numbers), and the verification last."""
    from certfsm.runtime import export_jsonl

    with _in_flags(artifact="--artifact"):
        if out is None:
            verification = export_jsonl(log, sys.stdout, artifact=artifact)
        else:
            with open(out, "w", encoding="utf-8") as handle:
                verification = export_jsonl(log, handle, artifact=artifact)
    raise typer.Exit(EXIT_OK if verification.ok else EXIT_FAILED)


@audit_app.command("report")
def audit_report(
    log: Path = typer.Argument(..., help="An audit log."),
    out: Path = typer.Option(..., "--out", help="The report folder (replaced whole)."),
    artifact: Optional[Path] = typer.Option(None, "--artifact", help="The logged artifact, to name the tokens."),
    x_input: Optional[str] = typer.Option(None, "--x", help="Decision map: input on the x axis."),
    y_input: Optional[str] = typer.Option(None, "--y", help="Decision map: input on the y axis."),
) -> None:
    """Figures and a report.md for people; exit 0 when the log verifies, 1 when not (the report says which record)."""
    from certfsm.runtime import write_audit_report

    with _in_flags(out="--out", artifact="--artifact", x_input="--x", y_input="--y"):
        report = write_audit_report(log, out, artifact=artifact, x_input=x_input, y_input=y_input)
    typer.echo(
        f"{out}/report.md: {report.steps} steps, {len(report.figures)} figures; {report.verification.describe()}"
    )
    raise typer.Exit(EXIT_OK if report.verification.ok else EXIT_FAILED)


@app.command()
def replay(
    log: Path = typer.Argument(..., help="An audit log written by certfsm run."),
    artifact: list[Path] = typer.Option(..., "--artifact", help="The artifact(s) the log names (repeat for swaps)."),
) -> None:
    """Re-execute every logged step; exit 0 only when every decision is reproduced, else print the first divergence."""
    from certfsm import runtime

    with _in_flags(artifacts="--artifact"):
        outcome = runtime.replay_log(log, artifact)
    if outcome.ok:
        typer.echo(
            f"{outcome.steps} steps replayed; every decision reproduced"
            + (f" ({outcome.reason})" if outcome.reason else "")
        )
        raise typer.Exit(EXIT_OK)
    typer.echo(f"divergence at record {outcome.first_divergence}: {outcome.reason}")
    raise typer.Exit(EXIT_FAILED)


_EXPORT_FLAGS = {"out": "--out", "module": "--module", "random_steps": "--random-steps", "check": "--check"}
"""The flag of each parameter of export_verilog and export_c that a flag passes."""


@app.command("export-verilog")
def export_verilog(
    artifact: Path = typer.Argument(..., help="A certified .cfsm artifact whose inputs all have frac_bits."),
    out: Path = typer.Option(..., "--out", help="Folder for the module, its test bench and vectors, summary.json."),
    check: bool = typer.Option(
        False,
        "--check",
        help="Also lint (verilator), simulate (iverilog), synthesize (yosys) and place and route (nextpnr-ice40, "
        "or nextpnr-ecp5 on the smallest ECP5 that holds what the iCE40 HX8K does not).",
    ),
    module: Optional[str] = typer.Option(None, "--module", help="Verilog module name (default certfsm_<spec name>)."),
    random_steps: Optional[int] = typer.Option(
        None,
        "--random-steps",
        help="Random edges in the test bench (default 200 000), on top of the cells, envelope edges and states.",
    ),
) -> None:
    """Write the certified machine as synthesizable Verilog-2005; with --check, exit 0 only when every check passes."""
    from certfsm.hdl_export import export_verilog as export

    def tell_fit(fit) -> None:
        typer.echo(("" if fit.fits else "warning: ") + fit.line())

    with _in_flags(**_EXPORT_FLAGS):
        result = export(
            artifact,
            out,
            check=check,
            module=module,
            random_steps=_random_steps(module, random_steps),
            on_fit=tell_fit,
        )
    summary = result.summary
    typer.echo(
        f"{result.module_file}: module {summary['module']['name']}, {summary['module']['cells']} cells"
        f"{_and_leaves(summary['module']['table'])}, "
        f"latency {summary['module']['latency_cycles']} cycles; test bench of {summary['testbench']['steps']} "
        "steps"
    )
    _finish_export(result, out, check)


def _random_steps(module: Optional[str], random_steps: Optional[int]) -> int:
    """Refuse a bad --module or --random-steps of an export before anything is written; the step count to use."""
    from certfsm.hdl_export import DEFAULT_RANDOM_STEPS, check_module_name

    if module is not None:
        check_module_name(module)
    random_steps = DEFAULT_RANDOM_STEPS if random_steps is None else random_steps
    if random_steps < 0:
        raise UsageError(f"--random-steps {random_steps} is negative; give 0 or more")
    return random_steps


def _and_leaves(record: dict) -> str:
    """The words " and N leaves" where an export's summary record counts a refined table's leaves, else nothing."""
    return f" and {record['leaves']:,} leaves" if record.get("leaves") else ""


def _finish_export(result, out: Path, check: bool) -> None:
    """Print each check of an export and where its summary is; exit 0 only when every check that ran passed."""
    for item in result.checks:
        typer.echo(f"{item.name}: {'pass' if item.passed else 'FAIL'}: {item.detail}")
    typer.echo(
        f"{out / 'summary.json'}: "
        + (
            "every check passed"
            if check and result.is_ok
            else "a check failed"
            if check
            else "written (no checks run: add --check)"
        )
    )
    raise typer.Exit(EXIT_OK if result.is_ok else EXIT_FAILED)


@app.command("export-c")
def export_c(
    artifact: Path = typer.Argument(..., help="A certified .cfsm artifact whose inputs all have frac_bits."),
    out: Path = typer.Option(..., "--out", help="Folder for the C99 header and source and summary.json."),
    check: bool = typer.Option(
        False,
        "--check",
        help="Also compile with gcc -std=c99 -Wall -Wextra -Werror and "
        "run it against the Python reference, check MISRA C:2012 "
        "(cppcheck's misra addon) and measure the Cortex-M4 flash "
        "and RAM (zig cc).",
    ),
    module: Optional[str] = typer.Option(
        None, "--module", help="Name prefix of the C API (default certfsm_<spec name>)."
    ),
    random_steps: Optional[int] = typer.Option(
        None,
        "--random-steps",
        help="Random cycles checked (default 200 000), on top of the cells, envelope edges and states.",
    ),
) -> None:
    """Write the certified machine as dependency-free C99; with --check, exit 0 only when it matches Python,
    follows MISRA C:2012 but for the deviations its header justifies, and builds for a Cortex-M4."""
    from certfsm.hdl_export import export_c as export

    with _in_flags(**_EXPORT_FLAGS):
        result = export(artifact, out, check=check, module=module, random_steps=_random_steps(module, random_steps))
    typer.echo(
        f"{result.header}, {result.source}: {result.summary['cells']} cells{_and_leaves(result.summary)}, one "
        "decision per call"
    )
    _finish_export(result, out, check)


@app.command("check-verilog")
def check_verilog(
    artifact: Path = typer.Argument(..., help="A certified .cfsm artifact whose inputs all have frac_bits."),
    module: Path = typer.Argument(..., help="A Verilog file with the module exported from it (edited or not)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Folder for the SMT-LIB queries and summary.json."),
    top: Optional[str] = typer.Option(None, "--top", help="The module to check when the file holds several."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds per query."),
) -> None:
    """Prove a Verilog module equal to the artifact's machine (every state, every input); exit 0 only when proved."""
    from certfsm.hdl_export import check_verilog as check

    with _in_flags(report="--report", timeout="--timeout", top="--top"):
        proof = check(artifact, module, report=report, timeout=_seconds("--timeout", timeout), top=top)
    for line in proof.lines():
        typer.echo(line)
    raise typer.Exit(EXIT_OK if proof.is_proved else EXIT_FAILED)


@spec_app.command("check")
def spec_check(spec: Path = typer.Argument(..., help="Controller spec (JSON).")) -> None:
    """Validate a controller spec against the schema and its semantic rules."""
    from certfsm import load_onnx
    from certfsm import check_grid_size, describe_spec, load_spec
    from certfsm.verify import check_network_fits_spec

    controller = load_spec(_spec_argument(spec, False, ""))
    check_grid_size(controller)
    network = load_onnx(controller.model_path)
    check_network_fits_spec(network, controller)
    for line in describe_spec(controller, network) + network.describe():
        typer.echo(line)
    typer.echo(f"{spec}: ok")


@spec_app.command("init")
def spec_init(
    model: Path = typer.Option(..., "--model", help="The ONNX model to start the spec from."),
    out: Optional[Path] = typer.Option(
        None, "--out", help="The spec file to write (default: the model's name with .spec.json); never overwritten."
    ),
) -> None:
    """Write a starting spec for an ONNX model: inputs and tokens from the model, each input's envelope to fill in."""
    import json

    from certfsm import starting_spec

    out = model.with_suffix(".spec.json") if out is None else out
    in_the_way = f"--out {out} already exists; spec init never overwrites a file, give another --out or move it away"
    if os.path.lexists(out):
        raise UsageError(in_the_way)
    document = starting_spec(model, spec_path=out)
    try:
        with open(out, "x", encoding="utf-8") as file:
            file.write(json.dumps(document, indent=2) + "\n")
    except FileExistsError:
        raise UsageError(in_the_way) from None
    except OSError as error:
        raise UsageError(f"--out {out}: cannot write the spec ({error.strerror}); choose another --out") from None
    inputs, tokens = document["inputs"], document["outputs"]
    typer.echo(
        f"{out}: a starting spec for {model}: {len(inputs)} inputs ({inputs[0]['name']}..{inputs[-1]['name']}), "
        f"{len(tokens)} tokens ({tokens[0]}..{tokens[-1]}), not valid until each input's envelope is filled in"
    )
    for step in (
        "fill in every input's min and max (now null): the physical range it takes in service, in the unit the "
        "network reads, and its unit; every proof covers that range, so take it from the plant, not the model",
        "rename the inputs and tokens (a token's name appears in tokens, legal_tokens and conservative_token too)",
        f"choose legal_tokens (now all), the conservative fallback token (now {tokens[0]}), and any legality_rules",
        f"choose the grid (now {inputs[0]['bins']} bins per input) and, for export-verilog or export-c, each input's "
        "frac_bits",
    ):
        typer.echo(f"next: {step}")
    typer.echo(f"then: certfsm spec check {out}")


def main(argv: Optional[list[str]] = None) -> int:
    """Console entry point: every mistake becomes one line on stderr and exit code 2.

    certfsm's own errors carry their message (file, field, fix); the CLI
    library's usage errors (an unknown option, a value of the wrong type)
    are reduced to one line too, naming the command's --help. Exit codes
    raised by the commands pass through; `certfsm` alone shows the help.
    """
    try:
        outcome = app(args=argv, prog_name="certfsm", standalone_mode=False)
    except CertfsmError as error:
        if _state["debug"]:
            raise
        typer.echo(f"certfsm: error: {error}", err=True)
        return EXIT_BAD_INPUT
    except typer.Exit as done:
        return done.exit_code
    except (KeyboardInterrupt, typer.Abort):
        typer.echo("certfsm: interrupted; nothing half-written was left behind", err=True)
        return 130
    except typer.TyperException as error:
        context = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
            typer.echo(context.get_help(), err=True)
            return EXIT_BAD_INPUT
        if _state["debug"]:
            raise
        command = context.command_path if context is not None else "certfsm"
        message = " ".join(error.format_message().split()) if hasattr(error, "format_message") else str(error)
        typer.echo(f"certfsm: error: {message}; see {command} --help", err=True)
        return EXIT_BAD_INPUT
    return outcome if isinstance(outcome, int) else EXIT_OK
