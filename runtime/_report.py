"""`certfsm audit report LOG --out DIR`: what a run decided, for people, as PNG figures and a report.md.

The log is read through `read_log` (every record used has verified) and
judged by `verify_log`; a log that does not verify still gets a report,
of the records before the bad one, and the report says which record is
bad. Figures (matplotlib, Agg canvas, imported here only when a report
is drawn, so `import certfsm.runtime` never pulls matplotlib in):

- timeline.png: the decided token at every step, hot swaps marked;
- probes.png: each input over the steps in its unit, its envelope as a
  band, readings outside it and missing ones marked (NaN readings leave
  gaps), then each SLA metric with its paths' limits; the steps of each
  fallback reason are shaded across every row, so the picture shows why
  the machine fell back (units, envelopes and limits need the artifact);
- reasons.png: decisions per reason, and SLA attainment (the share of
  cycles with sla_ok) per window of steps;
- decision_map.png: the decided token over two inputs (the most frequent
  token in each bin of the two inputs). With the artifact the bins are
  the certified grid's and the certified table is drawn beside it,
  titled with the artifact's sha256 prefix (per bin, the table's token
  at the cell the run visited most there; conservative cells hatched as
  in the distill report); without it the bins are 24 equal bins over the
  logged range and the title says it is a grid only, no certificate.
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
from ._log_export import check_logged_artifact

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from certfsm import StoredSpec

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
    machine, stored = _machine_of(artifact, header, swaps)
    n_tokens = len(machine.tokens) if machine is not None else max((s.token for s in steps), default=-1) + 1
    codes = {s.token: s.code for s in steps}
    tokens = (
        machine.tokens if machine is not None else tuple(f"#{k} (code {codes.get(k, '?')})" for k in range(n_tokens))
    )
    readings = np.array([_real_reading(s, machine) for s in steps], dtype=np.float64).reshape(len(steps), len(names))
    decided = np.array([s.token for s in steps], dtype=np.int64)
    why = np.array([s.reason for s in steps], dtype=np.int64)
    missing = np.array([[v is None or not math.isfinite(v) for v in s.reading] for s in steps], dtype=bool)
    metrics = np.array(
        [[s.metrics.get(m, math.nan) for m in header.metric_names] for s in steps], dtype=np.float64
    ).reshape(len(steps), len(header.metric_names))
    sla_ok = np.array([s.sla_ok for s in steps], dtype=bool)
    reasons = Counter(Reason(s.reason).name for s in steps)
    edges = _bin_edges(machine, readings, names)
    x, y = _axes(names, readings, edges, x_input, y_input)
    attainment = float(sla_ok.mean()) if len(steps) else math.nan
    token_counts = {tokens[k]: int(n) for k, n in enumerate(np.bincount(decided, minlength=n_tokens))}
    swap_steps = [sum(1 for s in steps if s.index < w.index) for w in swaps]

    pictures = {
        "timeline.png": _timeline(decided, tokens, swap_steps),
        "probes.png": _probes(
            _Run(readings, missing.reshape(readings.shape), why, metrics), names, header.metric_names, stored
        ),
        "reasons.png": _reasons(reasons, sla_ok),
        "decision_map.png": _decision_map(
            readings, decided, tokens, edges, names, x, y, machine, stored.units if stored is not None else ()
        ),
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
                _table_words(machine),
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
) -> tuple[Machine | None, StoredSpec | None]:
    """The machine of `artifact` and its stored spec (units, envelopes, SLA limits); (None, None) without it."""
    if artifact is None:
        return None, None
    from certfsm import load_artifact

    loaded = load_artifact(artifact)
    machine = Machine.from_artifact(loaded)
    check_logged_artifact(machine, header, (w.new_sha256 for w in swaps), artifact)
    return machine, loaded.stored_spec


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


@dataclass(frozen=True)
class _Run:
    """What the probe picture reads of the logged steps, one row per step: the readings as real values (NaN where
    missing or of unknown scale), where a reading was missing or not finite as logged, the reason codes, and the
    SLA metrics in the header's order (NaN where missing)."""

    readings: Floats
    missing: npt.NDArray[np.bool_]
    reasons: Ints
    metrics: Floats


FALLBACK_EXPLANATIONS = {
    Reason.FALLBACK_ENVELOPE: "a reading missing or outside its envelope",
    Reason.FALLBACK_SLA: "an SLA path in breach: see its metric",
}
"""Why the machine falls back to the conservative token, per fallback reason (docs/semantics.md, "State machine")."""
_FALLBACK_COLOURS = {Reason.FALLBACK_ENVELOPE: (0.84, 0.15, 0.16), Reason.FALLBACK_SLA: (0.58, 0.40, 0.74)}
_ENVELOPE_COLOUR = (0.17, 0.63, 0.17)
_UNKNOWN_UNITS = "units and envelopes unknown: give the artifact the log was written with"


def _runs(mask: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    """The runs of consecutive True entries of `mask` as (first, last) step indices."""
    import numpy as np

    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def _unit_label(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _mark_fallbacks(ax: Axes, reasons: Ints) -> None:
    """Shade the steps of each fallback reason across `ax`, one span per run of steps (gid fallback-REASON)."""
    for reason, colour in _FALLBACK_COLOURS.items():
        for first, last in _runs(reasons == reason):
            # the edge keeps a one-step span visible among thousands of steps
            ax.axvspan(
                first - 0.5,
                last + 0.5,
                facecolor=(*colour, 0.3),
                edgecolor=colour,
                linewidth=0.6,
                zorder=1,
                gid=f"fallback-{reason.name}",
            )


def _probes(run: _Run, names: Sequence[str], metric_names: Sequence[str], stored: StoredSpec | None) -> bytes:
    """One row per input (with its unit and envelope band when the artifact is given) and per SLA metric (with
    its limits), fallback steps shaded by reason: a fallback is explained by the reading or metric beside it."""
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = len(names) + len(metric_names)
    figure, axes = _figure(12.0, 1.6 * rows + 1.4, rows=rows)
    steps = np.arange(run.readings.shape[0])
    has = {"outside": False, "missing": False}
    for k, name in enumerate(names):
        ax = axes[k, 0]
        column = run.readings[:, k]
        _mark_fallbacks(ax, run.reasons)
        ax.plot(steps, column, linewidth=0.6, color="0.2")
        notes = []
        if stored is not None:
            item = stored.inputs[k]
            ax.axhspan(
                item.min,
                item.max,
                facecolor=(*_ENVELOPE_COLOUR, 0.08),
                edgecolor="none",
                zorder=0.5,
                gid=f"envelope-{name}",
            )
            for bound in (item.min, item.max):
                ax.axhline(bound, color=_ENVELOPE_COLOUR, linewidth=0.8, linestyle="--")
            outside = np.isfinite(column) & ((column < item.min) | (column > item.max))
            if outside.any():
                has["outside"] = True
                ax.plot(steps[outside], column[outside], "x", color="black", markersize=6, gid=f"outside-{name}")
                notes.append(f"{int(outside.sum())} outside the envelope")
            ax.set_ylabel(_unit_label(name, item.unit), fontsize=8)
            envelope = f"envelope [{item.min:g}, {item.max:g}]" + (f" {item.unit}" if item.unit else "")
        else:
            ax.set_ylabel(name, fontsize=8)
            envelope = "envelope unknown"
        missing = run.missing[:, k]
        if missing.any():
            has["missing"] = True
            ax.plot(
                steps[missing],
                np.ones(int(missing.sum())),
                "v",
                color=_FALLBACK_COLOURS[Reason.FALLBACK_ENVELOPE],
                markersize=6,
                transform=ax.get_xaxis_transform(),
                clip_on=False,
                gid=f"missing-{name}",
            )
            notes.append(f"{int(missing.sum())} missing or not finite")
        ax.set_title(f"{name}: {envelope}" + (f"; {', '.join(notes)}" if notes else ""), fontsize=9)
    paths = () if stored is None else stored.sla_paths
    for m, metric in enumerate(metric_names):
        ax = axes[len(names) + m, 0]
        _mark_fallbacks(ax, run.reasons)
        ax.plot(steps, run.metrics[:, m], linewidth=0.6, color="0.2")
        limits = [path for path in paths if path.metric == metric]
        for path in limits:
            ax.axhline(path.limit, color="black", linewidth=1.0, linestyle=":", gid=f"sla-limit-{path.name}")
        described = "; ".join(
            f"SLA path {p.name}: {p.statistic} <= {p.limit:g}, at most {p.max_violations} violations per "
            f"{p.window} cycles, healthy after {p.recovery_cycles} good cycles"
            for p in limits
        )
        ax.set_ylabel(metric, fontsize=8)
        ax.set_title(f"SLA metric {metric}" + (f" ({described})" if described else ""), fontsize=9)
    axes[-1, 0].set_xlabel("step")

    handles: list[Patch | Line2D] = []
    if stored is not None:
        handles.append(
            Patch(
                facecolor=(*_ENVELOPE_COLOUR, 0.08),
                edgecolor=_ENVELOPE_COLOUR,
                linestyle="--",
                label="envelope [min, max]",
            )
        )
    if has["outside"]:
        handles.append(
            Line2D([], [], marker="x", color="black", linestyle="none", label="reading outside its envelope")
        )
    if has["missing"]:
        handles.append(
            Line2D(
                [],
                [],
                marker="v",
                color=_FALLBACK_COLOURS[Reason.FALLBACK_ENVELOPE],
                linestyle="none",
                label="reading missing or not finite (marked at the top)",
            )
        )
    if any(p.metric in metric_names for p in paths):
        handles.append(Line2D([], [], color="black", linestyle=":", label="SLA limit"))
    for reason, colour in _FALLBACK_COLOURS.items():
        if (run.reasons == reason).any():
            count = int((run.reasons == reason).sum())
            label = f"{reason.name} ({count} steps): {FALLBACK_EXPLANATIONS[reason]}"
            handles.append(Patch(facecolor=(*colour, 0.3), edgecolor=colour, label=label))
    if handles:
        figure.legend(handles=handles, loc="outside lower center", frameon=False, ncol=min(len(handles), 2), fontsize=9)
    figure.suptitle(
        "probe trends (calibrated readings, as logged), fallback steps shaded by reason"
        + ("" if stored is not None else f"\n{_UNKNOWN_UNITS}")
    )
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


UNCERTIFIED_TITLE = "grid only, no certificate: pass --artifact to draw the certified table"
CONSERVATIVE_LABEL = "hatched: holds {token} (the conservative token), not proved for the network"


def _decision_map(
    readings: Floats,
    decided: Ints,
    tokens: Sequence[str],
    edges: Sequence[Floats],
    names: Sequence[str],
    x: int,
    y: int,
    machine: Machine | None = None,
    units: Sequence[str] = (),
) -> bytes:
    """The run's most frequent decided token per bin of x and y; with the machine, the certified table beside it
    (per bin, the table's token at the cell the run visited most there, hatched where not proved), else a plain
    grid titled as uncertified."""
    import numpy as np
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    colours = _colours(len(tokens))
    bx, by = _bins(readings[:, x], edges[x]), _bins(readings[:, y], edges[y])
    shown = (bx >= 0) & (by >= 0)
    counts = np.zeros((len(edges[y]) - 1, len(edges[x]) - 1, max(len(tokens), 1)), dtype=np.int64)
    np.add.at(counts, (by[shown], bx[shown], decided[shown]), 1)
    mode = np.where(counts.sum(axis=2) > 0, counts.argmax(axis=2), -1)
    figure, axes = _figure(14.0 if machine is not None else 8.0, 6.5, columns=2 if machine is not None else 1)
    norm = BoundaryNorm(np.arange(len(tokens) + 1) - 0.5, max(len(tokens), 1))
    colour_map = ListedColormap(colours)
    run_ax = axes[0, -1]
    run_ax.pcolormesh(edges[x], edges[y], np.ma.masked_less(mode, 0), cmap=colour_map, norm=norm)
    handles = [Patch(facecolor=colours[k], edgecolor="0.3", label=token) for k, token in enumerate(tokens)]
    in_range = f"{int(shown.sum())} of {len(decided)} steps in range; white: no reading there"
    if machine is None:
        run_ax.vlines(edges[x], edges[y][0], edges[y][-1], colors="0.5", linewidth=0.4, linestyles=":")
        run_ax.hlines(edges[y], edges[x][0], edges[x][-1], colors="0.5", linewidth=0.4, linestyles=":")
        run_ax.set_title(f"{UNCERTIFIED_TITLE}\nmost frequent decided token per bin; {in_range}")
        figure.suptitle(f"decision map over {names[x]} and {names[y]}: the run only, {_PLAIN_BINS} equal bins")
    else:
        table_ax = axes[0, 0]
        table, hatched = _visited_table(readings, machine, bx, by, shown, mode.shape)
        table_ax.pcolormesh(edges[x], edges[y], np.ma.masked_less(table, 0), cmap=colour_map, norm=norm)
        _hatch_cells(table_ax, hatched, edges[x], edges[y])
        if hatched.any():
            conservative = machine.tokens[machine.params.conservative]
            handles.append(
                Patch(
                    facecolor=colours[machine.params.conservative],
                    edgecolor="black",
                    hatch="///",
                    label=CONSERVATIVE_LABEL.format(token=conservative),
                )
            )
        for ax in (table_ax, run_ax):
            ax.vlines(edges[x], edges[y][0], edges[y][-1], colors="black", linewidth=0.4)
            ax.hlines(edges[y], edges[x][0], edges[x][-1], colors="black", linewidth=0.4)
            ax.set_xlabel(_unit_label(names[x], units[x] if units else ""))
            ax.set_ylabel(_unit_label(names[y], units[y] if units else ""))
        table_ax.set_title(
            f"certified table of artifact {machine.artifact_sha256[:12]} (sha256)\n"
            "per bin, the table's token at the cell the run visited most there; white: not visited"
        )
        run_ax.set_title(f"most frequent decided token per bin\n{in_range}")
        figure.suptitle(f"decision map over {names[x]} and {names[y]}: the certified grid")
    if machine is None:
        run_ax.set_xlabel(names[x])
        run_ax.set_ylabel(names[y])
    figure.legend(
        handles=handles,
        loc="outside lower center",
        frameon=False,
        ncol=len(handles) if len(handles) <= 6 else -(-len(handles) // 2),
    )
    return _png(figure)


def _visited_table(
    readings: Floats, machine: Machine, bx: Ints, by: Ints, shown: npt.NDArray[np.bool_], shape: tuple[int, ...]
) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """Per (y bin, x bin): the table's token at the cell the run's readings fell in most often there (-1: none),
    and whether that cell is conservative (not proved for the network)."""
    import numpy as np

    cells = RowBinning([list(e) for e in machine.edges], tuple(len(e) - 1 for e in machine.edges)).cells(readings)
    visited = shown & (cells >= 0)
    token = np.full(shape, -1, dtype=np.int64)
    hatched = np.zeros(shape, dtype=bool)
    proposal, exact = np.asarray(machine.proposal), np.asarray(machine.exact, dtype=bool)
    for j, i in set(zip(by[visited].tolist(), bx[visited].tolist())):
        here = cells[visited & (by == j) & (bx == i)]
        values, counts = np.unique(here, return_counts=True)
        cell = int(values[np.argmax(counts)])
        token[j, i] = proposal[cell]
        hatched[j, i] = not exact[cell]
    return token, hatched


def _hatch_cells(ax: Axes, hatched: npt.NDArray[np.bool_], x_edges: Floats, y_edges: Floats) -> None:
    """Hatch the (y bin, x bin) cells of `hatched`: a wide white hatch under a thin black one, so it reads on every
    token colour; the black collection (gid conservative-cells) holds one path per cell."""
    import numpy as np
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    if not hatched.any():
        return
    for colour, width, gid in (((1.0, 1.0, 1.0, 0.9), 3.0, None), ("black", 1.0, "conservative-cells")):
        boxes = [
            Rectangle((x_edges[i], y_edges[j]), x_edges[i + 1] - x_edges[i], y_edges[j + 1] - y_edges[j])
            for j, i in zip(*np.nonzero(hatched))
        ]
        collection = PatchCollection(boxes, facecolor="none", edgecolor=colour, linewidth=0.0, hatch="///", gid=gid)
        collection.set_hatch_linewidth(width)
        ax.add_collection(collection)


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
    table: tuple[str, str] | None = None,
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
    captions = _captions(table)
    for name, title in titles.items():
        lines += [f"### {title}", "", *([captions[name], ""] if name in captions else []), f"![{title}]({name})", ""]
    return "\n".join(lines)


def _table_words(machine: Machine | None) -> tuple[str, str] | None:
    """The certified table's names for the captions: the artifact's sha256 prefix and the conservative token."""
    return None if machine is None else (machine.artifact_sha256[:12], machine.tokens[machine.params.conservative])


def _captions(table: tuple[str, str] | None) -> dict[str, str]:
    """What the marks of each figure mean, as report.md says it; `table` as `_table_words` gives it."""
    fallbacks = (
        "Steps where the machine fell back to its conservative token are shaded across every row, by reason: "
        + "; ".join(
            f"{colour} for {reason.name} ({FALLBACK_EXPLANATIONS[reason]})"
            for reason, colour in zip(_FALLBACK_COLOURS, ("red", "purple"))
        )
        + "."
    )
    if table is None:
        probes = (
            "Each input over the steps; a missing or non-finite reading is marked by a red triangle at the top. "
            "Each SLA metric follows. "
            + fallbacks
            + " Units, envelopes and SLA limits are not drawn: the log does not hold them; give the artifact the "
            "log was written with to draw them."
        )
        decision_map = (
            f"Grid only, no certificate: the run's most frequent decided token in each of {_PLAIN_BINS} equal "
            "bins over the logged range of each input. These bins are not the certified grid; give the artifact "
            "the log was written with to draw the certified table."
        )
    else:
        sha, conservative = table
        probes = (
            "Each input over the steps, in its unit, with its envelope [min, max] as a green band between dashed "
            "lines; a reading outside the envelope is marked x, a missing or non-finite one by a red triangle at "
            "the top. Each SLA metric follows, with the limit of each SLA path on it dotted. " + fallbacks
        )
        decision_map = (
            f"Left, the certified table of artifact `{sha}`: in each bin of the certified grid, the token the "
            "table holds at the cell the run's readings fell in most often there (white: not visited). A hatched "
            f"cell holds the conservative token {conservative} because the network's decision was not proved "
            "there: it makes no claim about the network. Right, the token the machine decided, most frequent per "
            "bin; hysteresis, cooldown, fallbacks and overrides can make it differ from the table."
        )
    return {"probes.png": probes, "decision_map.png": decision_map}
