"""`certfsm audit report LOG --out DIR`: what a run decided, for people, as PNG figures and a report.md.

The log is read through `read_log` (every record used has verified) and
judged by `verify_log`; a log that does not verify still gets a report,
of the records before the bad one, and the report says which record is
bad. Figures (matplotlib, Agg canvas, imported here only when a report
is drawn, so `import certfsm.runtime` never pulls matplotlib in):

- timeline.png: the decided token at every step, hot swaps marked;
- probes.png: each input over the steps (NaN readings leave gaps);
- reasons.png: decisions per reason, and SLA attainment (the share of
  cycles with sla_ok) per window of steps;
- decision_map.png: the decided token over two inputs (the most frequent
  token in each bin of the two inputs; bins are the certified grid's
  when the artifact is given, else 24 equal bins over the logged range).
  The default inputs are the two whose logged readings fall in the most
  distinct bins.

The log names its artifact only by hash, so token names come from
`artifact` (which must be the logged artifact); without it tokens are
named by output index and 4-bit code. The folder is written with
`staged_folder`: it appears whole or not at all.
"""

from __future__ import annotations

import io
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certfsm import AuditLogError, UsageError, staged_folder
from certfsm.fast_binning import RowBinning
from certfsm.machine import Machine, Reason

from ._audit_format import LogHeader, StepRecord, SwapRecord
from ._audit_read import LogVerification, read_header, read_log, verify_log

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from matplotlib.figure import Figure

    Floats = npt.NDArray[np.float64]
    """A column of readings, or the readings (steps, inputs), or one input's bin edges."""
    Ints = npt.NDArray[np.int64]
    """Decided tokens per step, or bin indices per reading."""

FIGURES = {
    "timeline.png": "token timeline",
    "probes.png": "probe trends",
    "reasons.png": "reasons and SLA attainment",
    "decision_map.png": "decision map",
}
_DPI = 110
_PLAIN_BINS = 24


@dataclass(frozen=True)
class AuditReport:
    """What `write_audit_report` wrote: the folder, the log's verification, step and token counts, the figures' names."""

    folder: Path
    verification: LogVerification
    steps: int
    token_counts: dict[str, int]
    reason_counts: dict[str, int]
    sla_attainment: float
    axes: tuple[str, str]
    figures: tuple[str, ...]


def write_audit_report(
    log: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    artifact: str | os.PathLike[str] | None = None,
    x_input: str | None = None,
    y_input: str | None = None,
) -> AuditReport:
    """Write the report of the audit log `log` into the folder `out`; see the module docstring."""
    import numpy as np

    verification = verify_log(log)
    header = read_header(log)
    steps: list[StepRecord] = []
    swaps: list[SwapRecord] = []
    try:
        for record in read_log(log):
            if isinstance(record, StepRecord):
                steps.append(record)
            elif isinstance(record, SwapRecord):
                swaps.append(record)
    except AuditLogError:
        pass  # the records before the bad one were kept; the verification says which one is bad
    names = header.input_names
    machine = _machine_of(artifact, header, swaps)
    n_tokens = len(machine.tokens) if machine is not None else max((s.token for s in steps), default=-1) + 1
    codes = {s.token: s.code for s in steps}
    tokens = (
        machine.tokens if machine is not None else tuple(f"#{k} (code {codes.get(k, '?')})" for k in range(n_tokens))
    )
    readings = np.array([_real_reading(s, machine) for s in steps], dtype=np.float64).reshape(len(steps), len(names))
    decided = np.array([s.token for s in steps], dtype=np.int64)
    sla_ok = np.array([s.sla_ok for s in steps], dtype=bool)
    reasons = Counter(Reason(s.reason).name for s in steps)
    edges = _bin_edges(machine, readings, names)
    x, y = _axes(names, readings, edges, x_input, y_input)
    attainment = float(sla_ok.mean()) if len(steps) else math.nan
    token_counts = {tokens[k]: int(n) for k, n in enumerate(np.bincount(decided, minlength=n_tokens))}
    swap_steps = [sum(1 for s in steps if s.index < w.index) for w in swaps]

    pictures = {
        "timeline.png": _timeline(decided, tokens, swap_steps),
        "probes.png": _probes(readings, names),
        "reasons.png": _reasons(reasons, sla_ok),
        "decision_map.png": _decision_map(readings, decided, tokens, edges, names, x, y),
    }
    with staged_folder(out, parameter="out") as staging:
        for name, data in pictures.items():
            (staging / name).write_bytes(data)
        (staging / "report.md").write_text(
            _markdown(
                log,
                header,
                verification,
                len(steps),
                token_counts,
                reasons,
                attainment,
                swaps,
                names[x],
                names[y],
                machine is not None,
            ),
            encoding="utf-8",
        )
    return AuditReport(
        Path(out),
        verification,
        len(steps),
        token_counts,
        dict(reasons),
        attainment,
        (names[x], names[y]),
        tuple(pictures),
    )


def _real_reading(step: StepRecord, machine: Machine | None) -> tuple[float, ...]:
    """A logged reading as real values: a fixed-point step's integers v as v * 2^-frac_bits (with the artifact;
    without it their scale is unknown, so they are left out of the pictures as NaN)."""
    if not step.fixed:
        return step.reading
    scales = [] if machine is None else [bits for bits in machine.frac_bits if bits is not None]
    if machine is None or len(scales) < len(machine.frac_bits):  # no artifact, or an input without frac_bits
        return (math.nan,) * len(step.reading)
    return tuple(math.ldexp(v, -bits) for v, bits in zip(step.reading, scales))


def _machine_of(
    artifact: str | os.PathLike[str] | None, header: LogHeader, swaps: Sequence[SwapRecord]
) -> Machine | None:
    if artifact is None:
        return None
    from . import load_machine

    machine = load_machine(artifact)
    logged = {header.artifact_sha256, *(w.new_sha256 for w in swaps)}
    if machine.artifact_sha256 not in logged or machine.names != header.input_names:
        raise UsageError(
            f"artifact={os.fspath(artifact)!r}: artifact {machine.artifact_sha256[:12]} is not the one "
            f"the log names ({header.artifact_sha256[:12]}); give the artifact the log was written with"
        )
    return machine


def _bin_edges(machine: Machine | None, readings: Floats, names: Sequence[str]) -> list[Floats]:
    """Per input, the bin edges of the heat map: the certified grid's, else equal bins over the logged range."""
    import numpy as np

    if machine is not None:
        return [np.asarray(e, dtype=np.float64) for e in machine.edges]
    edges = []
    for column in readings.T:
        finite = column[np.isfinite(column)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        edges.append(np.linspace(low, high if high > low else low + 1.0, _PLAIN_BINS + 1))
    return edges


def _bins(column: Floats, edges: Floats) -> Ints:
    """Bin index per value (-1 for NaN, inf or outside the edges), by the machine's own binning rule."""
    return RowBinning([edges.tolist()], (len(edges) - 1,)).cells(column.reshape(-1, 1))


def _axes(
    names: Sequence[str], readings: Floats, edges: Sequence[Floats], x_input: str | None, y_input: str | None
) -> tuple[int, int]:
    import numpy as np

    if len(names) < 2:
        raise UsageError(f"the log has {len(names)} input(s) ({', '.join(names)}); a decision map needs two")
    for parameter, given in (("x_input", x_input), ("y_input", y_input)):
        if given is not None and given not in names:
            raise UsageError(f"{parameter}={given!r} is not an input of the log; the inputs are {', '.join(names)}")
    distinct = [len(set(np.unique(_bins(readings[:, k], edges[k]))) - {-1}) for k in range(len(names))]
    ranked = sorted(range(len(names)), key=lambda k: (-distinct[k], k))
    x = names.index(x_input) if x_input is not None else next(k for k in ranked if names[k] != y_input)
    y = names.index(y_input) if y_input is not None else next(k for k in ranked if k != x)
    if x == y:
        raise UsageError(f"x_input= and y_input= both name {names[x]}; give two different inputs")
    return x, y


# ----------------------------------------------------------------- drawing


def _figure(width: float, height: float, rows: int = 1, columns: int = 1) -> tuple[Figure, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, columns, squeeze=False)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _colours(n: int) -> npt.NDArray[np.float64]:
    from certfsm import token_colours

    colours: npt.NDArray[np.float64] = token_colours(max(n, 1))
    return colours


def _token_legend(figure: Figure, tokens: Sequence[str], colours: npt.NDArray[np.float64]) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=colours[k], edgecolor="0.3", label=token) for k, token in enumerate(tokens)]
    figure.legend(
        handles=handles,
        loc="outside lower center",
        frameon=False,
        ncol=len(handles) if len(handles) <= 6 else -(-len(handles) // 2),
    )


def _timeline(decided: Ints, tokens: Sequence[str], swap_steps: Sequence[int]) -> bytes:
    import numpy as np

    colours = _colours(len(tokens))
    figure, axes = _figure(12.0, 4.0)
    ax = axes[0, 0]
    steps = np.arange(len(decided))
    ax.step(steps, decided, where="post", color="0.6", linewidth=0.6)
    ax.scatter(steps, decided, c=colours[decided] if len(decided) else "none", s=6, zorder=3)
    for at in swap_steps:
        ax.axvline(at, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_xlabel("step")
    ax.set_title(
        f"decided token per step ({len(decided)} steps"
        + (f", {len(swap_steps)} hot swap(s) dashed)" if swap_steps else ")")
    )
    _token_legend(figure, tokens, colours)
    figure.suptitle("token timeline")
    return _png(figure)


def _probes(readings: Floats, names: Sequence[str]) -> bytes:
    import numpy as np

    figure, axes = _figure(12.0, 1.6 * len(names) + 0.8, rows=len(names))
    steps = np.arange(readings.shape[0])
    for k, name in enumerate(names):
        ax = axes[k, 0]
        ax.plot(steps, readings[:, k], linewidth=0.6, color=f"C{k % 10}")
        missing = int((~np.isfinite(readings[:, k])).sum())
        ax.set_ylabel(name)
        ax.set_title(f"{name}" + (f" ({missing} missing or non-finite readings)" if missing else ""), fontsize=9)
    axes[-1, 0].set_xlabel("step")
    figure.suptitle("probe trends (calibrated readings, as logged)")
    return _png(figure)


def _reasons(reasons: Counter[str], sla_ok: npt.NDArray[np.bool_]) -> bytes:
    import numpy as np

    figure, axes = _figure(12.0, 4.5, columns=2)
    left, right = axes[0]
    labels = [r.name for r in Reason if reasons.get(r.name)]
    counts = [reasons[label] for label in labels]
    left.barh(labels, counts, color="C0")
    for position, count in enumerate(counts):
        left.text(count, position, f" {count}", va="center", fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("decisions")
    left.set_title("decisions per reason")
    if len(sla_ok):
        window = max(1, len(sla_ok) // 50)
        shares = [sla_ok[start : start + window].mean() for start in range(0, len(sla_ok), window)]
        right.step(np.arange(len(shares)) * window, np.asarray(shares) * 100.0, where="post", color="C2")
        right.set_title(f"SLA attainment per {window} steps (overall {100.0 * sla_ok.mean():.2f}% of cycles sla_ok)")
    else:
        right.set_title("SLA attainment: no steps logged")
    right.set_ylim(-2, 102)
    right.set_xlabel("step")
    right.set_ylabel("cycles with sla_ok [%]")
    figure.suptitle("reasons and SLA attainment")
    return _png(figure)


def _decision_map(
    readings: Floats,
    decided: Ints,
    tokens: Sequence[str],
    edges: Sequence[Floats],
    names: Sequence[str],
    x: int,
    y: int,
) -> bytes:
    import numpy as np
    from matplotlib.colors import BoundaryNorm, ListedColormap

    colours = _colours(len(tokens))
    bx, by = _bins(readings[:, x], edges[x]), _bins(readings[:, y], edges[y])
    shown = (bx >= 0) & (by >= 0)
    counts = np.zeros((len(edges[y]) - 1, len(edges[x]) - 1, max(len(tokens), 1)), dtype=np.int64)
    np.add.at(counts, (by[shown], bx[shown], decided[shown]), 1)
    mode = np.where(counts.sum(axis=2) > 0, counts.argmax(axis=2), -1)
    figure, axes = _figure(8.0, 6.5)
    ax = axes[0, 0]
    norm = BoundaryNorm(np.arange(len(tokens) + 1) - 0.5, max(len(tokens), 1))
    ax.pcolormesh(edges[x], edges[y], np.ma.masked_less(mode, 0), cmap=ListedColormap(colours), norm=norm)
    ax.vlines(edges[x], edges[y][0], edges[y][-1], colors="black", linewidth=0.4)
    ax.hlines(edges[y], edges[x][0], edges[x][-1], colors="black", linewidth=0.4)
    ax.set_xlabel(names[x])
    ax.set_ylabel(names[y])
    ax.set_title(
        f"most frequent decided token per bin\n{int(shown.sum())} of {len(decided)} steps in range; "
        "white: no reading there"
    )
    _token_legend(figure, tokens, colours)
    figure.suptitle(f"decision map over {names[x]} and {names[y]}")
    return _png(figure)


# ------------------------------------------------------------------ report.md


def _markdown(
    log: str | os.PathLike[str],
    header: LogHeader,
    verification: LogVerification,
    steps: int,
    token_counts: dict[str, int],
    reasons: Counter[str],
    attainment: float,
    swaps: Sequence[SwapRecord],
    x_name: str,
    y_name: str,
    named: bool,
) -> str:
    verdict = "verifies" if verification.ok else "DOES NOT VERIFY"
    lines = [
        f"# Audit report: {Path(log).name}",
        "",
        f"- log: `{log}` ({len(verification.files)} file(s))",
        f"- artifact: `{header.artifact_sha256}`"
        + "".join(f"; hot swap at record {w.index} to `{w.new_sha256}`" for w in swaps),
        f"- verification: **{verdict}**: {verification.describe()}",
        f"- steps reported: {steps}"
        + ("" if verification.ok else " (only the records before the bad one; nothing after it is trusted)"),
        "- SLA attainment: " + (f"{100.0 * attainment:.2f}% of cycles with sla_ok" if steps else "no steps"),
        ""
        if named
        else (
            "- token names: not given (give the artifact the log was written with); tokens are "
            "named by output index and code"
        ),
        "",
        "## Tokens",
        "",
        "| token | steps |",
        "| --- | ---: |",
    ]
    lines += [f"| {token} | {count} |" for token, count in token_counts.items()]
    lines += ["", "## Reasons", "", "| reason | steps |", "| --- | ---: |"]
    lines += [f"| {reason.name} | {reasons[reason.name]} |" for reason in Reason if reasons.get(reason.name)]
    lines += ["", "## Figures", ""]
    titles = dict(FIGURES, **{"decision_map.png": f"decision map over {x_name} and {y_name}"})
    for name, title in titles.items():
        lines += [f"### {title}", "", f"![{title}]({name})", ""]
    return "\n".join(lines)
