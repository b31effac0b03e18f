"""The distill report's `summary.json` (for machines) and `report.md` (for people).

The summary lists the certificate entries with their `smt2` file names
and hashes, in the same shape as a verify report, so `certfsm recheck`
re-runs a distill report's SMT-LIB files unchanged. It also holds what
the artifact must not (so that the same spec and model give the same
artifact bytes): each entry's seconds and reason, and the run's times,
jobs and budgets.
"""

from __future__ import annotations

import json
from pathlib import Path

from certfsm import INVARIANT_QUERIES, certfsm_version

from ._decision_map import rule_notes

SUMMARY_SCHEMA_VERSION = 1

_DESCRIPTIONS = {
    "cells-exact": "every exact cell's token is proved for the whole cell, and no sampled input of an exact cell "
    "is decided otherwise by the network",
    "table-tokens": "every cell's token is legal and allowed in that cell by every rule",
    "table-masks": "every cell's allowed row holds exactly the legal tokens no rule forbids in the cell",
    "table-codes": "the 4-bit output never takes a code outside the token set",
}


def write_summary(
    folder: Path,
    *,
    spec,
    network,
    distillation,
    cross_check: dict,
    certificate,
    certified: bool,
    disagreements,
    pictures,
    artifact: Path,
    artifact_sha256: str,
    strict: bool = False,
    shortfalls: tuple[str, ...] = (),
    cell_certificate: dict | None = None,
) -> dict:
    """Write summary.json and report.md into `folder` (the staging folder) and return the summary.

    `shortfalls` (`_pipeline.shortfalls_of`) are listed whether or not the
    run was `strict`; with `strict` they make ``succeeded`` False.
    """
    from certfsm.verify import model_summary, spec_summary

    stats = distillation.stats
    summary = {
        "certfsm_summary": SUMMARY_SCHEMA_VERSION,
        "kind": "distill",
        "title": spec.name,
        "certfsm_version": certfsm_version(),
        "overall": "certified" if certified else "not certified",
        "strict": strict,
        "shortfalls": list(shortfalls),
        "succeeded": certified and not (strict and shortfalls),
        "model": model_summary(network),
        "spec": spec_summary(spec.path),
        "artifact": {
            "file": artifact.name,
            "path": str(artifact.resolve()),
            "sha256": artifact_sha256,
            "certified": certified,
        },
        "grid": {
            "inputs": [
                {"name": i.name, "unit": i.unit, "bins": int(n)}
                for i, n in zip(spec.inputs, distillation.table.grid.shape)
            ],
            "cells": stats["cells"],
        },
        "fidelity": {
            key: stats[key]
            for key in (
                "cells",
                "exact",
                "conservative_with_witness",
                "undecided",
                "exact_share",
                "exact_volume_share",
                "exact_by_token",
                "held_back_by_rules",
                "held_back_by_token",
            )
        },
        "engines": {
            key: stats[key]
            for key in (
                "by_engine",
                "bounds_share",
                "bounds_share_of_exact",
                "decided_without_marabou_share",
                "marabou_queries",
                "engine_tasks",
            )
        },
        "run": {
            key: stats[key]
            for key in (
                "seconds",
                "cells_per_second",
                "jobs",
                "per_cell_timeout",
                "work_budget",
                "seed",
                "resumed_cells",
                "reproved_checkpoint_cells",
            )
        },
        "cross_check": cross_check,
        "certificate": [
            {**record.report_entry(), "description": _description(record.property)} for record in certificate
        ],
        "disagreements": list(disagreements),
        "decision_maps": [
            {"file": Path(p.path).name, "x": p.x_input, "y": p.y_input, "fixed": p.fixed, "agreement": p.agreement}
            for p in pictures
        ],
        "cells_file": "cells.jsonl",
    }
    if cell_certificate is not None:
        summary["cell_certificate"] = cell_certificate
    if "refinement" in stats:  # only a refined table's summary has these, so a flat one keeps its bytes
        summary["refinement"] = stats["refinement"]
        summary["leaves_file"] = "leaves.jsonl"
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(_markdown(summary, spec), encoding="utf-8")
    return summary


def _description(name: str) -> str:
    if name in _DESCRIPTIONS:
        return _DESCRIPTIONS[name]
    from ._explicit import PROPERTY_DESCRIPTIONS

    for prefix in ("machine-", "enumeration-"):
        if name.startswith(prefix):
            short = name[len(prefix) :]
            if short in INVARIANT_QUERIES:
                return f"the machine's inductive invariant ({short.split('-')[1]} step)"
            return PROPERTY_DESCRIPTIONS.get(short, short)
    return name


def _percent(share: float) -> str:
    return f"{100.0 * share:.1f}%"


def _refinement_lines(refinement: dict | None) -> list[str]:
    """The report's refinement section (none for a flat table): leaves by status, exact volume per token."""
    if refinement is None:
        return []
    leaves = refinement["leaves_by_status"]
    before, after = refinement["exact_volume_by_token_before"], refinement["exact_volume_by_token"]
    return [
        "## Refinement",
        "",
        f"Cells that were not exact were split (at most {refinement['max_depth']} deep, {refinement['max_leaves']} "
        f"leaves per cell) and their parts proved again: {refinement['cells_refined']} cells hold a tree of "
        f"{refinement['leaves']} leaves in all ({leaves['exact']} exact, {leaves['conservative']} conservative, "
        f"{leaves['undecided']} undecided, {leaves['held_back']} held back by the rules), one line each in "
        "`leaves.jsonl`.",
        "",
        "| token | exact volume, flat | exact volume, refined |",
        "|---|---:|---:|",
        *(f"| {token} | {_percent(before[token])} | {_percent(after[token])} |" for token in before),
        f"| all | {_percent(refinement['exact_volume_share_before'])} | {_percent(refinement['exact_volume_share'])} |",
        "",
    ]


def _markdown(summary: dict, spec) -> str:
    fidelity, engines, run, cross = summary["fidelity"], summary["engines"], summary["run"], summary["cross_check"]
    cells = fidelity["cells"]
    conservative = cells - fidelity["exact"]
    lines = [
        f"# certfsm distillation report: {summary['title']}",
        "",
        f"**{summary['overall']}**: artifact `{summary['artifact']['file']}` "
        f"(payload SHA-256 `{summary['artifact']['sha256']}`).",
        "",
        *(
            [
                ("**Refused in strict mode**" if summary["strict"] else "**Not the whole network**")
                + ": "
                + "; ".join(summary["shortfalls"])
                + ".",
                "",
            ]
            if summary["shortfalls"]
            else []
        ),
        f"- certfsm {summary['certfsm_version']}",
        f"- model: `{summary['model']['file']}` (SHA-256 `{summary['model']['sha256']}`), "
        f"{summary['model']['inputs']} inputs, hidden {summary['model']['hidden']}, "
        f"{summary['model']['outputs']} outputs",
        f"- spec: `{summary['spec']['file']}` (SHA-256 `{summary['spec']['sha256']}`)",
        "- grid: " + " x ".join(f"{i['bins']} ({i['name']})" for i in summary["grid"]["inputs"]) + f" = {cells} cells",
        f"- {run['jobs']} jobs, {run['seconds']['total']:.1f} s, {run['cells_per_second']:.0f} cells/s",
        "",
        "## Fidelity",
        "",
        "| cells | count | share of cells | share of volume |",
        "|---|---:|---:|---:|",
        f"| exact (one token proved for the whole cell) | {fidelity['exact']} | "
        f"{_percent(fidelity['exact_share'])} | {_percent(fidelity['exact_volume_share'])} |",
        f"| conservative ({spec.conservative_token}) | {conservative} | "
        f"{_percent(1 - fidelity['exact_share'])} | {_percent(1 - fidelity['exact_volume_share'])} |",
        f"| of which with a witness pair | {fidelity['conservative_with_witness']} | | |",
        f"| of which undecided in the work budget | {fidelity['undecided']} | | |",
        f"| of which held back: the network's proved decision is forbidden there | "
        f"{fidelity['held_back_by_rules']} | | |",
        "",
        "Exact cells by token: " + ", ".join(f"{t} {n}" for t, n in fidelity["exact_by_token"].items() if n) + ".",
        "",
        *(
            [
                f"**The network breaks the legality rules**: in {fidelity['held_back_by_rules']} cells its decision "
                f"is proved to be a token the rules forbid there ("
                + ", ".join(f"{t} in {n}" for t, n in fidelity["held_back_by_token"].items())
                + "); the table holds the conservative token there instead.",
                "",
            ]
            if fidelity["held_back_by_rules"]
            else []
        ),
        "A conservative cell holds the conservative token. Its witness pair (two inputs of the cell whose "
        "gated decisions differ, in float64 and in onnxruntime) is in `cells.jsonl`, one line per cell.",
        "",
        *_refinement_lines(summary.get("refinement")),
        "## How cells were decided",
        "",
        "| engine | cells |",
        "|---|---:|",
    ]
    lines += [f"| {engine} | {count} |" for engine, count in engines["by_engine"].items()]
    lines += [
        "",
        f"Bound propagation decided {_percent(engines['bounds_share'])} of all cells "
        f"({_percent(engines['bounds_share_of_exact'])} of the exact ones); "
        f"{_percent(engines['decided_without_marabou_share'])} were decided without Marabou "
        f"({engines['marabou_queries']} Marabou queries).",
        "",
        "## Sampled cross-check",
        "",
        f"{cross['samples']} uniform random inputs over the envelope (seed {cross['seed']}): "
        f"{cross['on_exact']} fell in exact cells, where the table and the network's gated decision "
        f"disagreed **{cross['mismatches']}** times (float64)"
        + (
            f" and {cross['onnxruntime_mismatches']} times with onnxruntime"
            if "onnxruntime_mismatches" in cross
            else ""
        )
        + ". "
        f"Of the {cross['on_conservative']} inputs in conservative cells, the network itself chose "
        f"{spec.conservative_token} for {cross['conservative_agreements']}.",
        "",
        "## Certificate",
        "",
        "| property | engine | verdict | seconds | SMT-LIB file |",
        "|---|---|---|---:|---|",
    ]
    for entry in summary["certificate"]:
        smt2 = f"`{entry['smt2']}`" if entry["smt2"] else ""
        lines.append(
            f"| {entry['property']} | {entry['engine']} | {entry['verdict']} | {entry['seconds']:.3f} | {smt2} |"
        )
    lines += ["", "Property meanings:", ""]
    lines += [f"- `{entry['property']}`: {entry['description']}" for entry in summary["certificate"]]
    if summary["disagreements"]:
        lines += ["", "Z3 and enumeration disagree:", ""] + [f"- {line}" for line in summary["disagreements"]]
    for picture in summary["decision_maps"]:
        fixed = ", ".join(f"{k} = {v:g}" for k, v in picture["fixed"].items())
        notes = rule_notes(spec, picture["x"], picture["y"], picture["fixed"])
        lines += [
            "",
            f"## Decision map: {picture['x']} against {picture['y']}",
            "",
            f"Other inputs fixed at {fixed}. Left, the certified table: each cell in the colour of the token it "
            f"holds. A hatched (///) cell holds the conservative token {spec.conservative_token} because the "
            "network's decision was not proved there: it makes no claim about the network, so a different colour "
            "on the right is no disagreement. A cross-hatched (xx) cell is held back: the network's proved token "
            f"is forbidden there by a legality rule, so the table holds {spec.conservative_token}. A dashed box "
            "is a legality rule's box in the two drawn inputs, labelled with the rule's name and the tokens it "
            "forbids inside (dotted when the slice misses the rule in an input held fixed). Right, the "
            "network's gated decision at the fixed values, with the same boxes; a point of an exact cell where "
            "the table disagreed with the network would be black. On exact cells the two agree at "
            f"{_percent(picture['agreement'])} of the raster points.",
            *(
                ["", "Rules that also restrict the inputs held fixed:", ""] + [f"- {note}" for note in notes]
                if notes
                else []
            ),
            "",
            f"![decision map]({picture['file']})",
        ]
    lines += [
        "",
        "## Re-running the proofs",
        "",
        "Every `.smt2` file is a standalone SMT-LIB 2.6 script whose `:status` is the recorded verdict "
        "(unsat = proved). Re-run one with `z3 FILE.smt2`, or all of them with "
        "`certfsm recheck THIS_FOLDER [--solver z3|cvc5]`. `certfsm inspect ARTIFACT --report THIS_FOLDER` "
        "checks the artifact's hash, its certificate and the hashes of these files.",
        *_cell_certificate_lines(summary.get("cell_certificate")),
        "",
    ]
    return "\n".join(lines)


def _cell_certificate_lines(entry: dict | None) -> list[str]:
    """How to check the exact cells' proofs without certfsm's prover (`certfsm check-proof --report`)."""
    if entry is None:
        return []
    leaves = (
        f" and of {entry['certified_leaves']} of the {entry['exact_leaves']} exact leaves of refined cells"
        if "exact_leaves" in entry
        else ""
    )
    lines = [
        "",
        f"`{entry['file']}` is the proof certificate of {entry['certified_cells']} of the {entry['exact_cells']} "
        f"exact cells{leaves}: for each, the split of its box and what closes every part (bound-propagation data "
        "the checker recomputes, or an SMT-LIB query). `certfsm check-proof --report THIS_FOLDER` re-checks it "
        "with the independent checker, which shares no code with the prover.",
    ]
    if entry.get("not_certified"):
        lines += ["", f"Exact cells and leaves without a certificate entry: {entry['not_certified']}"]
    return lines
