"""The decision-map picture for reports: the certified table over two inputs next to the network's own decisions.

One figure, two panels on the same axes (the two chosen inputs, in
physical units), the other inputs held at fixed values:

1. "certified table": one rectangle per cell of the slice, i.e. every
   cell whose other inputs' bins are the bins of the fixed values
   (`Grid.cell_of`), filled in the colour of the token the table holds.
   A cell whose token was not proved (CONSERVATIVE, or UNDECIDED while a
   distillation runs) holds the conservative token, is filled in that
   token's colour and hatched "///": the table holds that token there,
   but it was not proved to be the network's decision (docs/semantics.md,
   "Certified distillation"). A held-back cell (the network's proved
   token is forbidden there by a legality rule) is cross-hatched "xx"
   instead. The bin edges are drawn.
2. "network (gated decision)": the gated decision, computed exactly as
   distillation computes it (`_cell_problem._problem(...).decisions`: the
   spec's rule, margin and conservative token in `gated_decide`), at the
   centres of a resolution x resolution raster over the two inputs'
   envelopes, the other inputs at their fixed values (not their cells).
   Raster points in EXACT cells where the table disagrees with the
   network are marked in black (no token colour is black); for a correctly certified table there are
   none. Conservative cells make no claim, so they are never compared.

On both panels every legality rule whose box is tighter than the
envelope in one of the two drawn inputs is drawn as a dashed box
(docs/semantics.md, "Legality rules"), labelled on the table panel with
its name and forbidden tokens. A rule that also restricts an input held
fixed is named in the caption (`rule_notes`), with whether the slice
meets its box there; a box the slice does not meet is drawn dotted and
labelled "not in this slice".

`DecisionMap.agreement` is the share of raster points lying in EXACT
cells whose table token equals the network's decision there: 1.0 for a
correct certificate, NaN when no raster point lies in an EXACT cell (no
claim to compare).

matplotlib is imported only when a picture is drawn, through
`matplotlib.figure.Figure` (no pyplot, no global backend switch), so the
module is safe inside libraries. The file is written atomically: the
picture is rendered in memory, written to a temporary file in the target
folder and renamed over `path`, so a failure leaves either the old file
or none. SVG output is reproducible (no date, fixed id salt) and keeps
text as text.
"""

from __future__ import annotations

import io
import math
import numbers
import os
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np

from certfsm import ReportError, SpecError, decimal_value, token_colours, write_atomically

from ._cell_problem import _problem
from ._grid import Grid
from ._table import EXACT, Table, _require_same_grid, rule_meets

FORMATS = {".png": "png", ".svg": "svg"}
"""Output formats by file suffix (case-insensitive)."""

MAX_RESOLUTION = 4096
CONSERVATIVE_LABEL = "hatched: holds {token} (the conservative token), not proved for the network"
HELD_BACK_LABEL = "cross-hatched: held back, the network's proved {proved} is forbidden here; holds {token}"
RULE_LABEL = "dashed box: a legality rule, its tokens forbidden inside"
CONSERVATIVE_HATCH = "///"
HELD_BACK_HATCH = "xx"
# The hatch is drawn in white over a thin dark line: it must read on every
# token colour (tab10 and tab20 have dark and light ones).
_HATCH_COLOUR = (1.0, 1.0, 1.0, 0.9)
_RULE_COLOUR = "black"
_DPI = 110
_SVG_SALT = "certfsm-decision-map"


@dataclass(frozen=True)
class DecisionMap:
    """What `render_decision_map` drew.

    `fixed` holds the value of every input other than x_input and
    y_input, in the spec's input order. `cells_shown` cells of the table
    are in the slice, `exact_shown` of them EXACT. `agreement` is the
    share of raster points in EXACT cells where the table's token equals
    the network's gated decision (NaN when no raster point lies in an
    EXACT cell).
    """

    path: Path
    x_input: str
    y_input: str
    fixed: dict
    cells_shown: int
    exact_shown: int
    agreement: float


def default_axes(spec) -> tuple[str, str]:
    """The two inputs the legality rules mention first (rule by rule, in input order), else the first inputs.

    A rule mentions an input when its box is tighter than the envelope
    there (the inputs its `when` names). Raises SpecError for a spec with
    fewer than two inputs.
    """
    _require_two_inputs(spec)
    chosen: list[str] = []
    for rule in spec.rules:
        for item, low, high in zip(spec.inputs, rule.lower, rule.upper):
            if (low > item.min or high < item.max) and item.name not in chosen:
                chosen.append(item.name)
    chosen += [item.name for item in spec.inputs if item.name not in chosen]
    return chosen[0], chosen[1]


def busiest_slice(spec, table: Table, x_input: str, y_input: str) -> dict[str, float]:
    """Fixed values for the other inputs: the bin centres of the slice whose exact cells show the most tokens.

    The envelope's centre is often a dull place (one token everywhere); a
    report's default picture should show where the decisions change.
    Ties go to the first slice in cell order.
    """
    x, y = check_axes(spec, x_input, y_input)
    _require_same_grid(table, spec)
    grid = table.grid
    shown = np.where(table.status == EXACT, table.proposal, -1).reshape(grid.shape)
    rows = np.moveaxis(shown, (x, y), (-2, -1)).reshape(-1, grid.shape[x] * grid.shape[y])
    distinct = sum((rows == token).any(axis=1).astype(np.int64) for token in range(spec.n_outputs))
    others = [i for i in range(spec.n_inputs) if i not in (x, y)]
    bins = np.unravel_index(int(np.argmax(distinct)), [grid.shape[i] for i in others])
    return {spec.inputs[i].name: float((grid.edges[i][b] + grid.edges[i][b + 1]) / 2.0) for i, b in zip(others, bins)}


def render_decision_map(
    spec,
    network,
    table: Table,
    path,
    *,
    x_input: str,
    y_input: str,
    fixed: dict[str, float] | None = None,
    resolution: int = 200,
    held_back=(),
) -> DecisionMap:
    """Draw the decision map of `table` and `network` over x_input and y_input to `path` (.png or .svg).

    `fixed` gives values for the other inputs (default: the centre of
    each one's envelope); values given for x_input or y_input are
    ignored. `held_back` lists cells whose proved token a legality rule
    forbids there (`Distillation.held_back`, which maps each to the
    network's token; the legend names those tokens): they hold the
    conservative token like the others but are drawn apart, since the
    network itself breaks a rule there. Raises SpecError for a bad argument (unknown or repeated
    input, a fixed value that is not a finite number inside its
    envelope, a fixed key that is not an input, a one-input spec, a
    suffix other than .png or .svg, a bad resolution, a table of another
    grid, a network that does not fit the spec) and ReportError when the
    file cannot be written.
    """
    target = Path(os.fspath(path))
    file_format = _file_format(target)
    x, y = check_axes(spec, x_input, y_input)
    values = _fixed_values(spec, x, y, fixed)
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, numbers.Integral)
        or not 2 <= resolution <= MAX_RESOLUTION
    ):
        raise SpecError(
            f"resolution={resolution!r} is not an integer from 2 to {MAX_RESOLUTION}; "
            "give the raster points per axis, e.g. resolution=200"
        )
    _require_same_grid(table, spec)
    problem = _problem(spec, network)
    if not target.parent.is_dir():
        raise ReportError(
            f"{target}: cannot write the decision map (folder {target.parent} does not exist); "
            "check that the folder exists and is writable"
        )
    grid = table.grid

    slice_cells = _slice_cells(grid, list(grid.multi_index(grid.cell_of(values))), x, y)
    x_points, y_points, raster = _raster(grid, values, x, y, int(resolution))
    decisions = problem.decisions(raster).reshape(len(y_points), len(x_points))
    raster_cells = grid.cell_of(raster).reshape(decisions.shape)
    in_exact = table.status[raster_cells] == EXACT
    wrong = in_exact & (table.proposal[raster_cells] != decisions)
    agreement = float(np.count_nonzero(in_exact & ~wrong) / np.count_nonzero(in_exact)) if in_exact.any() else math.nan
    result = DecisionMap(
        target,
        spec.inputs[x].name,
        spec.inputs[y].name,
        {spec.inputs[i].name: float(values[i]) for i in range(spec.n_inputs) if i not in (x, y)},
        int(slice_cells.size),
        int((table.status[slice_cells] == EXACT).sum()),
        agreement,
    )
    held = np.isin(slice_cells, np.fromiter(held_back, dtype=np.int64))
    proved = sorted({held_back[int(c)] for c in slice_cells[held]}) if hasattr(held_back, "keys") else []
    held_tokens = tuple(spec.outputs[k] for k in proved)
    rules = _rule_views(spec, grid, values, x, y)
    data = _draw(spec, table, result, slice_cells, held, held_tokens, rules, decisions, wrong, x, y, file_format)
    write_atomically(target, data, what="decision map", fix="check that the folder exists and is writable")
    return result


# ----------------------------------------------------------------- arguments


def _require_two_inputs(spec) -> None:
    if spec.n_inputs < 2:
        raise SpecError(
            f"{spec.path}: spec {spec.name!r} has one input ({spec.inputs[0].name}), so a decision map "
            "has nothing to plot it against; a decision map needs a spec with two or more inputs"
        )


def _file_format(target: Path) -> str:
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise SpecError(
            f"path={os.fspath(target)!r} has suffix {target.suffix!r}, expected one of "
            f"{', '.join(FORMATS)}; end the file name with .png or .svg"
        )
    return FORMATS[suffix]


def check_axes(spec, x_input: str, y_input: str) -> tuple[int, int]:
    """The positions of the two plotted inputs; SpecError naming the inputs when they are unknown or the same."""
    _require_two_inputs(spec)
    names = [item.name for item in spec.inputs]
    for label, name in (("x_input", x_input), ("y_input", y_input)):
        if name not in names:
            raise SpecError(
                f"{label}={name!r} is not an input of spec {spec.name!r} (inputs: {', '.join(names)}); "
                "use one of those names"
            )
    if x_input == y_input:
        raise SpecError(
            f"x_input and y_input are both {x_input!r}; choose two different inputs of spec "
            f"{spec.name!r} (inputs: {', '.join(names)})"
        )
    return names.index(x_input), names.index(y_input)


def _fixed_values(spec, x: int, y: int, fixed) -> np.ndarray:
    """One value per input: the given fixed value (inside the envelope, exactly) or the envelope's centre."""
    names = [item.name for item in spec.inputs]
    values = np.array([(item.min + item.max) / 2.0 for item in spec.inputs], dtype=np.float64)
    given = {} if fixed is None else fixed
    if not hasattr(given, "items"):
        raise SpecError(f"fixed={given!r:.60} is not a dict; give {{input name: value}} for the inputs to hold fixed")
    for name, value in given.items():
        if name not in names:
            raise SpecError(
                f"fixed has key {name!r}, which is not an input of spec {spec.name!r} "
                f"(inputs: {', '.join(names)}); use one of those names"
            )
        i = names.index(name)
        if i in (x, y):
            continue
        item = spec.inputs[i]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise SpecError(
                f"fixed[{name!r}]={value!r} is not a finite number; give a value in "
                f"[{item.min:g}, {item.max:g}] {item.unit}".rstrip()
            )
        if not decimal_value(item.min) <= Fraction(value) <= decimal_value(item.max):
            # Exactly, as the table reads a reading: a float64 that prints as the minimum may lie just below it.
            beyond = (
                f" (as a float64 it is {Decimal(value)}, beyond the decimal the spec means)"
                if item.min <= value <= item.max
                else ""
            )
            raise SpecError(
                f"fixed[{name!r}]={value!r} is outside the envelope [{item.min:g}, {item.max:g}] of "
                f"input {name}{beyond}; give a value in that range"
            )
        values[i] = float(value)
    # x and y are placed pixel by pixel; they get a value inside the envelope only so that the reading has a cell
    # (the envelope's minimum may round to a float64 just below the decimal the spec means).
    return values


# ----------------------------------------------------------------- the slice


def _slice_cells(grid: Grid, bins: list[int], x: int, y: int) -> np.ndarray:
    """(ny, nx) flat cell indices of the slice: row j, column i is x's bin i and y's bin j, the other
    inputs in their bins from `bins` (one bin per input; the entries of x and y are ignored)."""
    ny, nx = grid.shape[y], grid.shape[x]
    index = [np.full((ny, nx), b, dtype=np.int64) for b in bins]
    index[y], index[x] = np.indices((ny, nx))
    return np.ravel_multi_index(tuple(index), grid.shape)


def _raster(grid: Grid, values: np.ndarray, x: int, y: int, resolution: int):
    """Pixel centres along x and y over the envelope, and every raster point as a full input row (y-major)."""

    def centres(i: int) -> np.ndarray:
        low, high = grid.edges[i][0], grid.edges[i][-1]
        return low + (np.arange(resolution) + 0.5) * ((high - low) / resolution)

    x_points, y_points = centres(x), centres(y)
    rows = np.tile(values, (resolution * resolution, 1))
    grid_y, grid_x = np.meshgrid(y_points, x_points, indexing="ij")
    rows[:, x], rows[:, y] = grid_x.ravel(), grid_y.ravel()
    return x_points, y_points, rows


# ----------------------------------------------------------------- legality rules


@dataclass(frozen=True)
class _RuleView:
    """A legality rule as one decision map sees it (docs/semantics.md, "Legality rules").

    `box` is (x_low, x_high, y_low, y_high), or None when the rule's box
    is the whole envelope in both drawn inputs (nothing to draw).
    `in_slice` says whether the slice's cells meet the rule's box in every
    input held fixed (the table's panel: the rule forbids its tokens there),
    `note` is the caption's sentence when the rule also restricts an input
    held fixed (else None).
    """

    name: str
    forbid: tuple[str, ...]
    box: tuple[float, float, float, float] | None
    in_slice: bool
    note: str | None


def _rule_views(spec, grid: Grid, values: np.ndarray, x: int, y: int) -> list[_RuleView]:
    bins = list(grid.multi_index(grid.cell_of(values)))
    slice_cells = _slice_cells(grid, bins, x, y).ravel()
    meets_slice = rule_meets(spec, grid)[:, slice_cells].any(axis=1)
    views = []
    for rule, in_slice in zip(spec.rules, meets_slice.tolist()):
        restricted = [i for i, item in enumerate(spec.inputs) if rule.lower[i] > item.min or rule.upper[i] < item.max]
        fixed = [i for i in restricted if i not in (x, y)]
        box = None
        if x in restricted or y in restricted:
            box = (rule.lower[x], rule.upper[x], rule.lower[y], rule.upper[y])
        note = None
        if fixed:
            ranges = ", ".join(_range_text(spec.inputs[i], rule.lower[i], rule.upper[i]) for i in fixed)
            at = ", ".join(_value_text(spec.inputs[i], values[i], len(fixed) > 1) for i in fixed)
            inside = all(rule.lower[i] <= values[i] <= rule.upper[i] for i in fixed)
            where = "in its box" if box is not None else "in the whole slice"
            if in_slice and inside:
                verdict = f"applies {where}"
            elif in_slice:
                verdict = f"outside, but its bin meets the rule, which binds the table's cells {where}"
            else:
                verdict = "does not apply in this slice" + (" (box dotted)" if box is not None else "")
            note = f"rule {rule.name} (forbids {', '.join(rule.forbid)}) also needs {ranges}; held at {at}: {verdict}"
        views.append(_RuleView(rule.name, tuple(rule.forbid), box, in_slice, note))
    return views


def _range_text(item, low: float, high: float) -> str:
    unit = f" {item.unit}" if item.unit else ""
    if low > item.min and high < item.max:
        return f"{low:g} <= {item.name} <= {high:g}{unit}"
    if low > item.min:
        return f"{item.name} >= {low:g}{unit}"
    return f"{item.name} <= {high:g}{unit}"


def _value_text(item, value: float, named: bool) -> str:
    text = f"{value:g}" + (f" {item.unit}" if item.unit else "")
    return f"{item.name}={text}" if named else text


def rule_notes(spec, x_input: str, y_input: str, fixed: dict[str, float] | None = None) -> tuple[str, ...]:
    """The caption's sentences for the legality rules that restrict an input held fixed, in rule order.

    The same words as the picture's caption, for a report that describes
    the picture; `fixed` as for `render_decision_map`.
    """
    x, y = check_axes(spec, x_input, y_input)
    values = _fixed_values(spec, x, y, fixed)
    grid = Grid.from_spec(spec)
    return tuple(view.note for view in _rule_views(spec, grid, values, x, y) if view.note is not None)


# ----------------------------------------------------------------- drawing


def _axis_label(item) -> str:
    return f"{item.name} [{item.unit}]" if item.unit else item.name


def _draw(
    spec,
    table: Table,
    result: DecisionMap,
    slice_cells: np.ndarray,
    held: np.ndarray,
    held_tokens: tuple[str, ...],
    rules: list[_RuleView],
    decisions: np.ndarray,
    wrong: np.ndarray,
    x: int,
    y: int,
    file_format: str,
) -> bytes:
    return _encoded(
        _figure(spec, table, result, slice_cells, held, held_tokens, rules, decisions, wrong, x, y), file_format
    )


def _hatched(cells: np.ndarray, x_edges, y_edges, hatch: str, gid: str):
    """The cells of `cells` (a (ny, nx) mask) as two hatched collections, a wide light hatch under a thin dark one,
    so the hatch reads on every token colour; the dark one carries `gid` and holds one path per cell."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    def boxes():
        return [
            Rectangle((x_edges[i], y_edges[j]), x_edges[i + 1] - x_edges[i], y_edges[j + 1] - y_edges[j])
            for j, i in zip(*np.nonzero(cells))
        ]

    light = PatchCollection(boxes(), facecolor="none", edgecolor=_HATCH_COLOUR, linewidth=0.0, hatch=hatch)
    light.set_hatch_linewidth(3.0)
    dark = PatchCollection(boxes(), facecolor="none", edgecolor="black", linewidth=0.0, hatch=hatch, gid=gid)
    dark.set_hatch_linewidth(1.0)
    return light, dark


def _figure(
    spec,
    table: Table,
    result: DecisionMap,
    slice_cells: np.ndarray,
    held: np.ndarray,
    held_tokens: tuple[str, ...],
    rules: list[_RuleView],
    decisions: np.ndarray,
    wrong: np.ndarray,
    x: int,
    y: int,
):
    from matplotlib import patheffects
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    grid = table.grid
    x_edges, y_edges = grid.edges[x], grid.edges[y]
    extent = (x_edges[0], x_edges[-1], y_edges[0], y_edges[-1])
    colours = token_colours(spec.n_outputs)
    colour_map = ListedColormap(colours)
    norm = BoundaryNorm(np.arange(spec.n_outputs + 1) - 0.5, spec.n_outputs)
    not_proved = (table.status[slice_cells] != EXACT) & ~held
    conservative = spec.conservative_token

    figure = Figure(figsize=(12.5, 6.0), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2, sharex=True, sharey=True)

    left.pcolormesh(x_edges, y_edges, table.proposal[slice_cells], cmap=colour_map, norm=norm)
    for mask, hatch, gid in (
        (not_proved, CONSERVATIVE_HATCH, "conservative-cells"),
        (held, HELD_BACK_HATCH, "held-back-cells"),
    ):
        if mask.any():
            for collection in _hatched(mask, x_edges, y_edges, hatch, gid):
                left.add_collection(collection)
    left.vlines(x_edges, y_edges[0], y_edges[-1], colors="black", linewidth=0.8)
    left.hlines(y_edges, x_edges[0], x_edges[-1], colors="black", linewidth=0.8)
    left.set_title(f"certified table\n{result.exact_shown} of {result.cells_shown} cells exact")

    right.imshow(
        decisions, cmap=colour_map, norm=norm, origin="lower", extent=extent, aspect="auto", interpolation="nearest"
    )
    if wrong.any():
        marks = np.zeros(wrong.shape + (4,))
        marks[wrong] = (0.0, 0.0, 0.0, 1.0)
        right.imshow(marks, origin="lower", extent=extent, aspect="auto", interpolation="nearest")
    right.vlines(x_edges, y_edges[0], y_edges[-1], colors="black", linewidth=0.3, alpha=0.6)
    right.hlines(y_edges, x_edges[0], x_edges[-1], colors="black", linewidth=0.3, alpha=0.6)
    if math.isnan(result.agreement):
        agreement = "no exact cell in the slice to compare"
    else:
        agreement = f"agrees with the exact cells at {100.0 * result.agreement:.2f}% of the points"
    right.set_title(f"network (gated decision)\n{agreement}")

    outline = [patheffects.withStroke(linewidth=4.5, foreground="white")]
    drawn = [view for view in rules if view.box is not None]
    for view in drawn:
        x_low, x_high, y_low, y_high = view.box
        label = f"rule {view.name}: forbids {', '.join(view.forbid)}" + (
            "" if view.in_slice else " (not in this slice)"
        )
        for axes in (left, right):
            box = Rectangle(
                (x_low, y_low),
                x_high - x_low,
                y_high - y_low,
                facecolor="none",
                edgecolor=_RULE_COLOUR,
                linewidth=2.0,
                linestyle="--" if view.in_slice else ":",
                label=label,
                gid=f"rule-{view.name}",
                zorder=4,
                clip_on=True,
            )
            box.set_path_effects(outline)
            axes.add_patch(box)
        left.annotate(
            f"{view.name}\nforbids {', '.join(view.forbid)}" + ("" if view.in_slice else "\n(not in this slice)"),
            xy=(max(x_low, extent[0]), max(y_low, extent[2])),
            xytext=(4, 4),
            textcoords="offset points",
            fontsize=8,
            va="bottom",
            ha="left",
            zorder=5,
            gid=f"rule-label-{view.name}",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": _RULE_COLOUR, "alpha": 0.85},
        )

    for axes in (left, right):
        axes.set_xlim(extent[0], extent[1])
        axes.set_ylim(extent[2], extent[3])
        axes.set_xlabel(_axis_label(spec.inputs[x]))
    left.set_ylabel(_axis_label(spec.inputs[y]))

    tokens = []
    for k, token in enumerate(spec.outputs):
        note = "" if spec.is_legal_index(k) else " (not legal)"
        tokens.append(Patch(facecolor=colours[k], edgecolor="0.3", label=f"{token}{note}"))
    marks = []
    if not_proved.any():
        marks.append(
            Patch(
                facecolor=colours[spec.conservative_index],
                edgecolor="black",
                hatch=CONSERVATIVE_HATCH,
                label=CONSERVATIVE_LABEL.format(token=conservative),
            )
        )
    if held.any():
        marks.append(
            Patch(
                facecolor=colours[spec.conservative_index],
                edgecolor="black",
                hatch=HELD_BACK_HATCH,
                label=HELD_BACK_LABEL.format(proved=" or ".join(held_tokens) or "token", token=conservative),
            )
        )
    if drawn:
        marks.append(Line2D([], [], color=_RULE_COLOUR, linestyle="--", linewidth=2.0, label=RULE_LABEL))
    if wrong.any():
        marks.append(Patch(facecolor=(0.0, 0.0, 0.0), label="table disagrees with network"))
    figure.legend(handles=tokens, loc="outside right center", frameon=False, title="token", fontsize=9)
    if marks:
        figure.legend(handles=marks, loc="outside lower center", frameon=False, ncol=min(len(marks), 2), fontsize=9)

    units = {item.name: item.unit for item in spec.inputs}
    fixed_text = ", ".join(
        f"{name}={value:g}{' ' + units[name] if units[name] else ''}" for name, value in result.fixed.items()
    )
    notes = [view.note for view in rules if view.note is not None]
    figure.suptitle(
        f"{spec.name}: decision map over {result.x_input} and {result.y_input}"
        + (
            f"\nfixed: {fixed_text} (table: the cells holding these values; network: at these values)"
            if fixed_text
            else ""
        )
        + "".join(f"\n{note}" for note in notes)
    )
    return figure


def _encoded(figure, file_format: str) -> bytes:
    import matplotlib

    buffer = io.BytesIO()
    if file_format == "svg":
        with matplotlib.rc_context({"svg.hashsalt": _SVG_SALT, "svg.fonttype": "none"}):
            figure.savefig(buffer, format="svg", metadata={"Date": None})
    else:
        figure.savefig(buffer, format="png")
    return buffer.getvalue()
