"""The report folder: summary.json, report.md, one .smt2 file per query and one certificate per proof.

A property proved by branch and bound also gets its proof certificate,
``NN_name.cert.json`` (`_certificate`), named and hashed in its entry of
summary.json (``certificate``, ``certificate_sha256``); where none could
be written, ``certificate_missing`` says why.

The folder is built beside its destination and swapped in with renames,
so a failure (bad input, crash, Ctrl-C) never leaves a half-written
report: either the old folder is still there untouched, or the new one is
complete.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from certfsm import certfsm_version, decide, staged_folder

from ._exact import plain_decimal
from ._property import Property
from ._result import Result

SUMMARY_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InputNaming:
    """How to show an input vector to a person: names, units and token names."""

    input_names: tuple[str, ...]
    input_units: tuple[str, ...]
    output_names: tuple[str, ...]
    decision: str | None = None

    @classmethod
    def plain(cls, n_inputs: int, n_outputs: int) -> "InputNaming":
        return cls(
            tuple(f"X_{i}" for i in range(n_inputs)), ("",) * n_inputs, tuple(f"Y_{j}" for j in range(n_outputs))
        )

    @classmethod
    def from_spec(cls, spec) -> "InputNaming":
        return cls(
            tuple(i.name for i in spec.inputs), tuple(i.unit for i in spec.inputs), tuple(spec.outputs), spec.decision
        )


def query_file_name(index: int, prop: Property) -> str:
    """A stable, filesystem-safe file name: position first so files sort in report order."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", prop.name).strip("_") or "property"
    return f"{index:02d}_{slug}.smt2"


def _entry(index, prop, result, naming, smt2_name, smt2_sha) -> dict:
    entry = {
        "property": prop.name,
        "description": prop.description,
        "verdict": result.verdict,
        "engine": result.engine,
        "seconds": round(result.seconds, 3),
        "reason": result.reason,
        "smt2": smt2_name,
        "smt2_sha256": smt2_sha,
        "stats": result.stats,
        "input_box": {name: [float(lo), float(hi)] for name, lo, hi in zip(naming.input_names, prop.lower, prop.upper)},
    }
    if result.counterexample is not None:
        entry["counterexample"] = {n: float(v) for n, v in zip(naming.input_names, result.counterexample)}
        entry["counterexample_exact"] = {n: plain_decimal(v) for n, v in zip(naming.input_names, result.counterexample)}
        entry["outputs"] = {n: float(v) for n, v in zip(naming.output_names, result.outputs)}
        if naming.decision:
            entry["decision"] = naming.output_names[int(decide(result.outputs, naming.decision))]
    return entry


def _markdown(summary: dict, naming: InputNaming) -> str:
    lines = [f"# certfsm verification report: {summary['title']}", ""]
    lines += [
        f"- certfsm {summary['certfsm_version']}",
        f"- model: `{summary['model']['file']}` (sha256 `{summary['model']['sha256']}`)",
    ]
    if summary.get("spec"):
        lines.append(f"- spec: `{summary['spec']['file']}` (sha256 `{summary['spec']['sha256']}`)")
    lines += [
        f"- engine: {summary['settings']['engine']}, timeout {summary['settings']['timeout']} s "
        f"per property, {summary['settings']['jobs']} jobs",
        f"- overall: **{summary['overall']}** ("
        + ", ".join(f"{count} {verdict}" for verdict, count in summary["counts"].items())
        + ")",
        "",
        "| property | verdict | engine | time (s) | SMT-LIB |",
        "|---|---|---|---|---|",
    ]
    for entry in summary["properties"]:
        lines.append(
            f"| {entry['property']} | **{entry['verdict']}** | {entry['engine']} | "
            f"{entry['seconds']:.3f} | [{entry['smt2']}]({entry['smt2']}) |"
        )
    for entry in summary["properties"]:
        lines += [
            "",
            f"## {entry['property']}: {entry['verdict']}",
            "",
            f"Claim: {entry['description']}.",
            "",
            "Over the input box "
            + ", ".join(f"{name} in [{lo:.9g}, {hi:.9g}]" for name, (lo, hi) in entry["input_box"].items())
            + ".",
            "",
            _shown(entry),
        ]
        if entry["reason"]:
            lines += ["", f"Reason: {entry['reason']}"]
        if "counterexample" in entry:
            lines += [
                "",
                "Counterexample (unsafe exactly, in numpy float64 and in onnxruntime; each value is the "
                "exact decimal of the float64 that was checked):",
                "",
                "| input | value | unit |",
                "|---|---|---|",
            ]
            for name, unit in zip(naming.input_names, naming.input_units):
                lines.append(f"| {name} | {entry['counterexample_exact'][name]} | {unit} |")
            scores = ", ".join(f"{k} = {v:.6g}" for k, v in entry["outputs"].items())
            lines += ["", f"Scores there: {scores}."]
            if "decision" in entry:
                lines.append(f"The network chooses **{entry['decision']}**.")
    lines += [
        "",
        "## Re-running the proofs",
        "",
        "Every `.smt2` file is a standalone SMT-LIB 2.6 script whose `:status` is the recorded "
        "verdict (unsat = proved, sat = violated). Re-run one with `z3 FILE.smt2`, or all of "
        "them with `certfsm recheck THIS_FOLDER [--solver z3|cvc5]`.",
        "",
    ]
    return "\n".join(lines)


def _shown(entry: dict) -> str:
    """What the verdict showed about the claim, said so that a violated claim never reads as a success."""
    if entry["verdict"] == "proved":
        return f"Shown: the claim holds ({entry['engine']})."
    if entry["verdict"] == "violated":
        chosen = f"; there the network chooses **{entry['decision']}**" if "decision" in entry else ""
        return f"Shown: the claim is **false**: it fails at the counterexample below{chosen}."
    return "Shown: nothing; the claim is neither proved nor refuted (see the reason)."


def model_summary(network) -> dict:
    """The model as summary.json names it: file, path, SHA-256 and shape (verify and distill reports alike).

    A graph network also gets ``reads``: per layer, the activations it
    reads (0 the input, k + 1 hidden layer k), since its hidden sizes alone
    do not say how it is wired. A chain's summary has no such key and
    stays as it was.
    """
    summary = {
        "file": os.path.basename(network.source_path) or "(in memory)",
        "path": network.source_path,
        "sha256": network.sha256,
        "inputs": network.n_inputs,
        "outputs": network.n_outputs,
        "hidden": list(network.hidden_sizes),
    }
    if not network.is_chain:
        summary["reads"] = [list(chosen) for chosen in network.reads]
    return summary


def spec_summary(spec_path) -> dict:
    """The spec file as summary.json names it: file, absolute path and the SHA-256 of its bytes."""
    import hashlib

    path = Path(spec_path)
    return {"file": path.name, "path": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def write_report(
    folder,
    *,
    title: str,
    network,
    properties: list[Property],
    results: list[Result],
    naming: InputNaming,
    settings: dict,
    spec_path=None,
) -> dict:
    """Write the whole report folder atomically and return the summary dict."""
    from ._smtlib import write_smtlib

    with staged_folder(folder) as staging:
        entries = []
        for index, (prop, result) in enumerate(zip(properties, results)):
            name = query_file_name(index, prop)
            sha = write_smtlib(
                staging / name,
                network,
                prop,
                verdict=result.verdict,
                engine=result.engine,
                seconds=result.seconds,
                extra={"reason": result.reason} if result.reason else None,
            )
            entry = _entry(index, prop, result, naming, name, sha)
            if result.verdict == "proved":
                entry.update(_certificate_entry(staging, name.removesuffix(".smt2"), network, prop, result))
            entries.append(entry)
        verdicts = [r.verdict for r in results]
        summary = {
            "certfsm_summary": SUMMARY_SCHEMA_VERSION,
            "title": title,
            "certfsm_version": certfsm_version(),
            "model": model_summary(network),
            "spec": spec_summary(spec_path) if spec_path else None,
            "settings": settings,
            "overall": overall_verdict(verdicts),
            "counts": {v: verdicts.count(v) for v in ("proved", "violated", "unknown")},
            "properties": entries,
        }
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default) + "\n")
        (staging / "report.md").write_text(_markdown(summary, naming))
    return summary


def _certificate_entry(staging: Path, stem: str, network, prop: Property, result: Result) -> dict:
    """Write the proof's certificate into the report; its summary fields."""
    from ._certificate import NoCertificate, write_proof_certificate

    name = f"{stem}.cert.json"
    try:
        sha = write_proof_certificate(staging / name, network, [prop], [result])
    except NoCertificate as why:
        return {"certificate": None, "certificate_missing": str(why)}
    return {"certificate": name, "certificate_sha256": sha}


def overall_verdict(verdicts) -> str:
    """proved only when every property is proved; violated wins over unknown."""
    if verdicts and all(v == "proved" for v in verdicts):
        return "proved"
    return "violated" if "violated" in verdicts else "unknown"


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
