"""The decision-map picture: written atomically as PNG or SVG, the slice and the agreement are the table's and
the network's, and every bad argument is refused with a pinned message."""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

import certfsm
from certfsm import AffineLayer, Network, ReportError, SpecError
from certfsm import spec_from_dict
from certfsm.examples import example_spec_path
from certfsm.fsm import CONSERVATIVE, EXACT
from certfsm.fsm._grid import Grid
from certfsm.fsm._table import Table
from certfsm.fsm import _decision_map
from certfsm.fsm._decision_map import CONSERVATIVE_LABEL, DecisionMap, default_axes, render_decision_map, token_colours

pytest.importorskip("matplotlib")

KEEP, A, B = range(3)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG_ROOT = "{http://www.w3.org/2000/svg}svg"
BUSY = {"compute_util": 95.0, "mem_bw_util": 80.0, "l2_miss_rate": 60.0}
"""A slice of the example where the table holds three tokens and many conservative cells."""


# ----------------------------------------------------------------- tiny case


def tiny_spec(n_inputs=3, margin=None, rules=(), x2_edges=(0.0, 1.0, 2.0)):
    """x0, x1 in [0, 1] with two bins each, x2 in volts with `x2_edges`; outputs KEEP, A, B."""
    inputs = [
        {"name": "x0", "unit": "", "min": 0.0, "max": 1.0, "edges": [0.0, 0.5, 1.0]},
        {"name": "x1", "unit": "", "min": 0.0, "max": 1.0, "edges": [0.0, 0.5, 1.0]},
        {"name": "x2", "unit": "V", "min": x2_edges[0], "max": x2_edges[-1], "edges": list(x2_edges)},
    ]
    document = {
        "certfsm_spec": 1,
        "name": f"tiny{n_inputs}",
        "model": "tiny.onnx",
        "inputs": inputs[:n_inputs],
        "outputs": ["KEEP", "A", "B"],
        "tokens": {"KEEP": 0, "A": 1, "B": 2},
        "legal_tokens": ["KEEP", "A", "B"],
        "decision": "argmax",
        "conservative_token": "KEEP",
        "legality_rules": list(rules),
    }
    if margin is not None:
        document["confidence_gate"] = {"margin": margin}
    return spec_from_dict(document, f"/nonexistent/tiny{n_inputs}.spec.json", require_model=False)


def tiny_network(n_inputs=3):
    """KEEP scores 0, A scores 4 (x0 - 0.5), B the opposite: B wins left of x0 = 0.5, A right of it."""
    weight = np.zeros((2, n_inputs))
    weight[:, 0] = [1.0, -1.0]
    hidden = AffineLayer(weight, np.array([-0.5, 0.5]), "hidden")
    out = AffineLayer(np.array([[0.0, 0.0], [4.0, -4.0], [-4.0, 4.0]]), np.zeros(3), "out")
    return Network((hidden, out), input_name="x")


def hand_table(spec, left_token=B, only_x2_bin=0):
    """Cells with x0 in [0, 0.5) and x2 in bin `only_x2_bin` EXACT with `left_token`; all others CONSERVATIVE."""
    grid = Grid.from_spec(spec)
    cells = np.arange(grid.n_cells)
    bins = np.array([grid.multi_index(c) for c in cells])
    exact = (bins[:, 0] == 0) & (bins[:, 2] == only_x2_bin)
    return Table.undecided(spec).with_decisions(
        cells, np.where(exact, left_token, KEEP), np.where(exact, EXACT, CONSERVATIVE)
    )


def render_tiny(path, spec=None, network=None, table=None, **options):
    """Render the tiny case over x0 and x1, by default at x2 = 0.5 (the slice where `hand_table` has exact cells)."""
    spec = tiny_spec() if spec is None else spec
    options = {"x_input": "x0", "y_input": "x1", "fixed": {"x2": 0.5}, **options}
    return render_decision_map(spec, network or tiny_network(spec.n_inputs), table or hand_table(spec), path, **options)


def pixels_near(image: np.ndarray, rgb, tolerance=2.5 / 255) -> int:
    """How many pixels of an RGB(A) float image have colour `rgb` within `tolerance` per channel."""
    return int(np.all(np.abs(image[..., :3] - np.asarray(rgb)[:3]) <= tolerance, axis=-1).sum())


# ----------------------------------------------------------------- the example


@pytest.fixture(scope="module")
def example():
    spec = certfsm.load_spec(example_spec_path("coadapt"))
    return spec, certfsm.load_onnx(spec.model_path)


@pytest.fixture(scope="module")
def distilled(distilled_example):
    """The example's certified table, from the session's one distillation."""
    return distilled_example[1].distillation.table


def slice_status(spec, table, x_input, y_input, fixed):
    """(ny, nx) statuses of the cells holding each (x bin, y bin) centre with the other inputs at `fixed`."""
    grid = table.grid
    names = list(grid.names)
    x, y = names.index(x_input), names.index(y_input)
    point = np.array([fixed.get(n, (item.min + item.max) / 2) for n, item in zip(names, spec.inputs)])
    centres = [(e[:-1] + e[1:]) / 2 for e in grid.edges]
    statuses = np.empty((grid.shape[y], grid.shape[x]), dtype=int)
    for j, yc in enumerate(centres[y]):
        for i, xc in enumerate(centres[x]):
            point[x], point[y] = xc, yc
            statuses[j, i] = table.status[grid.cell_of(point)]
    return statuses


def test_default_axes_of_the_example_are_the_inputs_its_rules_name(example):
    spec, _ = example
    assert default_axes(spec) == ("temperature", "queue_depth")


@pytest.mark.slow
@pytest.mark.parametrize(
    "x_input, y_input, fixed",
    [
        ("temperature", "queue_depth", {}),
        pytest.param("temperature", "queue_depth", BUSY, marks=pytest.mark.slow),
        ("compute_util", "mem_bw_util", {"l2_miss_rate": 60.0, "temperature": 90.0, "queue_depth": 60.0}),
    ],
)
def test_the_certified_example_agrees_everywhere_on_its_exact_cells(
    example, distilled, tmp_path, x_input, y_input, fixed
):
    spec, network = example
    result = render_decision_map(
        spec, network, distilled, tmp_path / "map.png", x_input=x_input, y_input=y_input, fixed=fixed, resolution=120
    )
    statuses = slice_status(spec, distilled, x_input, y_input, fixed)
    expected_fixed = {
        item.name: float(fixed.get(item.name, (item.min + item.max) / 2))
        for item in spec.inputs
        if item.name not in (x_input, y_input)
    }
    assert result == DecisionMap(
        tmp_path / "map.png", x_input, y_input, expected_fixed, statuses.size, int((statuses == EXACT).sum()), 1.0
    )
    assert result.exact_shown > 0 and type(result.agreement) is float
    assert (tmp_path / "map.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.slow
def test_a_wrong_exact_cell_in_the_slice_lowers_the_agreement_and_is_marked(example, distilled, tmp_path):
    spec, network = example
    grid = distilled.grid
    names = list(grid.names)
    point = np.array([BUSY.get(n, 0.0) for n in names])
    point[names.index("temperature")], point[names.index("queue_depth")] = 75.0, 20.0
    cell = grid.cell_of(point)
    assert distilled.status[cell] == EXACT
    token = distilled.proposal[cell]
    other = next(k for k in spec.legal_indices if k != token)
    wrong = distilled.with_decisions([cell], [other], [EXACT])
    result = render_decision_map(
        spec, network, wrong, tmp_path / "wrong.svg", x_input="temperature", y_input="queue_depth", fixed=BUSY
    )
    assert result.agreement < 1.0
    assert "table disagrees with network" in (tmp_path / "wrong.svg").read_text()
    right = render_decision_map(
        spec, network, distilled, tmp_path / "right.svg", x_input="temperature", y_input="queue_depth", fixed=BUSY
    )
    assert right.agreement == 1.0
    assert "table disagrees with network" not in (tmp_path / "right.svg").read_text()


# ----------------------------------------------------------------- what is drawn


@pytest.fixture
def drawn(monkeypatch):
    """The matplotlib figures `render_decision_map` draws, in order, captured where they are encoded."""
    figures = []
    encode = _decision_map._encoded

    def keep(figure, file_format):
        figures.append(figure)
        return encode(figure, file_format)

    monkeypatch.setattr(_decision_map, "_encoded", keep)
    return figures


def table_axes(figure):
    return figure.axes[0]


def by_gid(axes, prefix):
    """The artists of `axes` (patches, collections, texts) whose gid starts with `prefix`."""
    artists = [*axes.patches, *axes.collections, *axes.texts]
    return [a for a in artists if (a.get_gid() or "").startswith(prefix)]


def legend_labels(figure):
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


@pytest.mark.slow
def test_png_shows_the_token_colours_and_the_conservative_cells_in_the_conservative_colour(tmp_path):
    """Conservative cells are filled with KEEP's colour (the token they hold), hatched in white over black."""
    from matplotlib.image import imread

    spec = tiny_spec()
    colours = token_colours(spec.n_outputs)
    result = render_tiny(tmp_path / "map.png", spec)
    assert (tmp_path / "map.png").read_bytes().startswith(PNG_MAGIC)
    image = imread(tmp_path / "map.png")
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 600
    assert result.cells_shown == 4 and result.exact_shown == 2 and result.agreement == 1.0
    # B fills the exact cells and the network's left half, A its right half; the two conservative cells hold KEEP
    assert pixels_near(image, colours[B]) > 10_000
    assert pixels_near(image, colours[A]) > 5_000
    assert pixels_near(image, colours[KEEP]) > 5_000
    all_exact = Table.undecided(spec).with_decisions(np.arange(8), [B, B, B, B, A, A, A, A], [EXACT] * 8)
    render_tiny(tmp_path / "exact.png", spec, table=all_exact)
    assert pixels_near(imread(tmp_path / "exact.png"), colours[KEEP]) < 1_000  # the legend's swatch only


def test_conservative_cells_hold_the_conservative_token_and_are_hatched_one_by_one(tmp_path, drawn):
    spec = tiny_spec()
    result = render_tiny(tmp_path / "map.png", spec)
    figure = drawn[-1]
    axes = table_axes(figure)
    mesh = next(c for c in axes.collections if type(c).__name__ == "QuadMesh")
    # row j, column i: x1's bin j, x0's bin i; x0's left bins are exact B, the right ones conservative KEEP
    assert np.asarray(mesh.get_array()).reshape(2, 2).tolist() == [[B, KEEP], [B, KEEP]]
    (hatched,) = by_gid(axes, "conservative-cells")
    assert hatched.get_hatch() == _decision_map.CONSERVATIVE_HATCH
    assert len(hatched.get_paths()) == result.cells_shown - result.exact_shown == 2
    assert by_gid(axes, "held-back-cells") == []
    label = "hatched: holds KEEP (the conservative token), not proved for the network"
    assert label in legend_labels(figure)
    all_exact = Table.undecided(spec).with_decisions(np.arange(8), [B, B, B, B, A, A, A, A], [EXACT] * 8)
    render_tiny(tmp_path / "exact.png", spec, table=all_exact)
    assert by_gid(table_axes(drawn[-1]), "conservative-cells") == []
    assert not any("not proved" in text for text in legend_labels(drawn[-1]))


def test_the_example_map_hatches_exactly_its_conservative_cells(example, distilled, tmp_path, drawn):
    spec, network = example
    result = render_decision_map(
        spec,
        network,
        distilled,
        tmp_path / "map.png",
        x_input="temperature",
        y_input="queue_depth",
        fixed=BUSY,
        resolution=20,
    )
    statuses = slice_status(spec, distilled, "temperature", "queue_depth", BUSY)
    conservative = int((statuses != EXACT).sum())
    assert conservative == result.cells_shown - result.exact_shown > 0
    (hatched,) = by_gid(table_axes(drawn[-1]), "conservative-cells")
    assert len(hatched.get_paths()) == conservative


RULES = (
    {"name": "hot-right", "when": {"x0": {"min": 0.5}}, "forbid": ["A"]},
    {"name": "high-x2", "when": {"x2": {"min": 1.0}}, "forbid": ["B"]},
    {"name": "corner", "when": {"x1": {"max": 0.25}, "x2": {"max": 0.5}}, "forbid": ["A", "B"]},
)


def test_a_rule_box_is_drawn_and_labelled_where_it_restricts_a_drawn_input(tmp_path, drawn):
    spec = tiny_spec(rules=RULES)
    render_tiny(tmp_path / "map.png", spec, fixed={"x2": 0.25})
    figure = drawn[-1]
    axes = table_axes(figure)
    boxes = by_gid(axes, "rule-")
    assert sorted(b.get_gid() for b in boxes if b in axes.patches) == ["rule-corner", "rule-hot-right"]
    (hot,) = [b for b in axes.patches if b.get_gid() == "rule-hot-right"]
    assert (hot.get_x(), hot.get_y(), hot.get_width(), hot.get_height()) == (0.5, 0.0, 0.5, 1.0)
    assert hot.get_label() == "rule hot-right: forbids A" and hot.get_linestyle() == "--"
    (corner,) = [b for b in axes.patches if b.get_gid() == "rule-corner"]
    assert (corner.get_x(), corner.get_y(), corner.get_width(), corner.get_height()) == (0.0, 0.0, 1.0, 0.25)
    labels = {t.get_gid(): t.get_text() for t in axes.texts}
    assert labels == {"rule-label-hot-right": "hot-right\nforbids A", "rule-label-corner": "corner\nforbids A, B"}
    # the network's panel shows the same boxes, unlabelled
    assert sorted(p.get_gid() for p in figure.axes[1].patches) == ["rule-corner", "rule-hot-right"]
    assert len(figure.axes[1].texts) == 0
    assert _decision_map.RULE_LABEL in legend_labels(figure)
    title = figure.get_suptitle()
    assert "rule hot-right" not in title
    assert "rule high-x2 (forbids B) also needs x2 >= 1 V; held at 0.25 V: does not apply in this slice" in title
    assert "rule corner (forbids A, B) also needs x2 <= 0.5 V; held at 0.25 V: applies in its box" in title


def test_a_rule_box_outside_the_slice_is_dotted_and_says_so(tmp_path, drawn):
    spec = tiny_spec(rules=RULES)
    render_tiny(tmp_path / "map.png", spec, fixed={"x2": 1.5})
    axes = table_axes(drawn[-1])
    styles = {p.get_gid(): p.get_linestyle() for p in axes.patches}
    assert styles == {"rule-hot-right": "--", "rule-corner": ":"}
    assert {t.get_gid(): t.get_text() for t in axes.texts}["rule-label-corner"] == (
        "corner\nforbids A, B\n(not in this slice)"
    )
    title = drawn[-1].get_suptitle()
    assert "rule high-x2 (forbids B) also needs x2 >= 1 V; held at 1.5 V: applies in the whole slice" in title
    assert (
        "rule corner (forbids A, B) also needs x2 <= 0.5 V; held at 1.5 V: does not apply in this slice (box dotted)"
        in title
    )


def test_no_rule_no_box(tmp_path, drawn):
    render_tiny(tmp_path / "map.png")
    figure = drawn[-1]
    assert by_gid(table_axes(figure), "rule") == [] and _decision_map.RULE_LABEL not in legend_labels(figure)


@pytest.mark.parametrize(
    "x2, note",
    [
        (0.5, "held at 0.5 V: does not apply in this slice"),
        # the bin [0, 1) holding 0.9 does not meet a rule starting at 1: bins are half-open
        (0.9, "held at 0.9 V: does not apply in this slice"),
        (1.0, "held at 1 V: applies in the whole slice"),
    ],
)
def test_rule_notes_follow_the_cells_half_open_bins(x2, note):
    spec = tiny_spec(rules=RULES[1:2])
    (text,) = _decision_map.rule_notes(spec, "x0", "x1", {"x2": x2})
    assert text == f"rule high-x2 (forbids B) also needs x2 >= 1 V; {note}"


def test_a_value_outside_the_rule_whose_bin_meets_it_says_the_table_is_bound():
    spec = tiny_spec(rules=({"name": "mid", "when": {"x2": {"min": 0.5}}, "forbid": ["B"]},))
    (text,) = _decision_map.rule_notes(spec, "x0", "x1", {"x2": 0.25})
    assert text == (
        "rule mid (forbids B) also needs x2 >= 0.5 V; held at 0.25 V: outside, but its bin meets the rule, which "
        "binds the table's cells in the whole slice"
    )
    assert _decision_map.rule_notes(spec, "x0", "x2") == ()


@pytest.mark.slow
def test_svg_is_xml_with_titles_legend_and_hatching_only_where_shown(tmp_path):
    spec = tiny_spec()
    render_tiny(tmp_path / "map.svg", spec, fixed={"x2": 0.25})
    text = (tmp_path / "map.svg").read_text()
    assert ElementTree.parse(tmp_path / "map.svg").getroot().tag == SVG_ROOT
    for label in (
        "certified table",
        "network (gated decision)",
        "KEEP",
        "A",
        "B",
        "x0",
        "x1",
        "fixed: x2=0.25 V",
        CONSERVATIVE_LABEL.format(token="KEEP"),
    ):
        assert label in text, label
    assert "<pattern" in text
    all_exact = Table.undecided(spec).with_decisions(np.arange(8), [B, B, B, B, A, A, A, A], [EXACT] * 8)
    render_tiny(tmp_path / "exact.svg", spec, table=all_exact)
    exact_text = (tmp_path / "exact.svg").read_text()
    assert CONSERVATIVE_LABEL.format(token="KEEP") not in exact_text and "<pattern" not in exact_text


@pytest.mark.slow
def test_svg_output_is_reproducible_and_the_suffix_case_does_not_matter(tmp_path):
    render_tiny(tmp_path / "first.svg")
    render_tiny(tmp_path / "SECOND.SVG")
    assert (tmp_path / "first.svg").read_bytes() == (tmp_path / "SECOND.SVG").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("x2, exact_shown", [(0.999, 2), (1.0, 0), pytest.param(2.0, 0, marks=pytest.mark.slow)])
def test_the_fixed_value_picks_the_slice_of_cells_that_holds_it(tmp_path, x2, exact_shown):
    result = render_tiny(tmp_path / "map.png", fixed={"x2": x2, "x0": 7.0})
    assert result.fixed == {"x2": x2}
    assert (result.cells_shown, result.exact_shown) == (4, exact_shown)
    assert result.agreement == 1.0 if exact_shown else math.isnan(result.agreement)


def test_fixed_defaults_to_the_centre_of_the_envelope(tmp_path):
    result = render_tiny(tmp_path / "map.png", spec=tiny_spec(x2_edges=(0.0, 1.0, 3.0)), fixed=None)
    assert result.fixed == {"x2": 1.5}
    assert result.exact_shown == 0


@pytest.mark.slow
def test_the_network_panel_applies_the_confidence_gate(tmp_path):
    # margin 1: B is emitted only for x0 <= 0.25, KEEP in (0.25, 0.5): half of each exact B cell disagrees
    assert render_tiny(tmp_path / "plain.png", spec=tiny_spec()).agreement == 1.0
    assert render_tiny(tmp_path / "gated.png", spec=tiny_spec(margin=1.0)).agreement == 0.5


@pytest.mark.slow
def test_a_flipped_exact_cell_of_the_hand_table_is_caught(tmp_path):
    spec = tiny_spec()
    assert render_tiny(tmp_path / "map.png", spec, table=hand_table(spec, left_token=A)).agreement == 0.0
    grid = Grid.from_spec(spec)
    one_cell = hand_table(spec).with_decisions([grid.cell_index((0, 0, 0))], [A], [EXACT])
    assert render_tiny(tmp_path / "map.png", spec, table=one_cell).agreement == 0.5


@pytest.mark.parametrize(
    "rules, expected",
    [
        ((), ("x0", "x1")),
        (({"name": "r", "when": {"x2": {"min": 1.5}}, "forbid": ["A"]},), ("x2", "x0")),
        (({"name": "r", "when": {"x2": {"max": 0.5}, "x1": {"min": 0.5}}, "forbid": ["A"]},), ("x1", "x2")),
        (
            (
                {"name": "r", "when": {"x1": {"min": 0.0}}, "forbid": ["A"]},
                {"name": "s", "when": {"x2": {"min": 1.0}}, "forbid": ["B"]},
            ),
            ("x2", "x0"),
        ),
    ],
)
def test_default_axes_follow_the_rules_then_the_input_order(rules, expected):
    assert default_axes(tiny_spec(rules=rules)) == expected


# ----------------------------------------------------------------- errors


ONE_INPUT = (
    r"^/nonexistent/tiny1\.spec\.json: spec 'tiny1' has one input \(x0\), so a decision map has nothing "
    r"to plot it against; a decision map needs a spec with two or more inputs$"
)

BAD_ARGUMENTS = [
    (
        {"x_input": "speed"},
        r"^x_input='speed' is not an input of spec 'tiny3' \(inputs: x0, x1, x2\); "
        r"use one of those names$",
    ),
    (
        {"y_input": "x9"},
        r"^y_input='x9' is not an input of spec 'tiny3' \(inputs: x0, x1, x2\); use one of those "
        r"names$",
    ),
    (
        {"y_input": "x0"},
        r"^x_input and y_input are both 'x0'; choose two different inputs of spec 'tiny3' "
        r"\(inputs: x0, x1, x2\)$",
    ),
    (
        {"fixed": {"x2": 2.5}},
        r"^fixed\['x2'\]=2\.5 is outside the envelope \[0, 2\] of input x2; give a value in "
        r"that range$",
    ),
    ({"fixed": {"x2": -0.001}}, r"^fixed\['x2'\]=-0\.001 is outside the envelope \[0, 2\] of input x2; "),
    ({"fixed": {"x2": math.nan}}, r"^fixed\['x2'\]=nan is not a finite number; give a value in \[0, 2\] V$"),
    ({"fixed": {"x2": math.inf}}, r"^fixed\['x2'\]=inf is not a finite number; "),
    ({"fixed": {"x2": "1"}}, r"^fixed\['x2'\]='1' is not a finite number; "),
    ({"fixed": {"x2": True}}, r"^fixed\['x2'\]=True is not a finite number; "),
    (
        {"fixed": {"speed": 1.0}},
        r"^fixed has key 'speed', which is not an input of spec 'tiny3' \(inputs: x0, x1, "
        r"x2\); use one of those names$",
    ),
    ({"fixed": [1.0]}, r"^fixed=\[1\.0\] is not a dict; give \{input name: value\} for the inputs to hold fixed$"),
    (
        {"resolution": 1},
        r"^resolution=1 is not an integer from 2 to 4096; give the raster points per axis, "
        r"e\.g\. resolution=200$",
    ),
    ({"resolution": 10_000}, r"^resolution=10000 is not an integer from 2 to 4096; "),
    ({"resolution": 50.0}, r"^resolution=50\.0 is not an integer from 2 to 4096; "),
    ({"resolution": True}, r"^resolution=True is not an integer from 2 to 4096; "),
]


@pytest.mark.parametrize("options, message", BAD_ARGUMENTS)
def test_bad_arguments_are_refused_and_nothing_is_written(tmp_path, options, message):
    with pytest.raises(SpecError, match=message):
        render_tiny(tmp_path / "map.png", **options)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["map.pdf", "map", "map.png.txt"])
def test_only_png_and_svg_suffixes_are_accepted(tmp_path, name):
    suffix = os.path.splitext(name)[1]
    message = (
        rf"^path='{re.escape(str(tmp_path / name))}' has suffix '{re.escape(suffix)}', expected one of "
        r"\.png, \.svg; end the file name with \.png or \.svg$"
    )
    with pytest.raises(SpecError, match=message):
        render_tiny(tmp_path / name)
    assert os.listdir(tmp_path) == []


def test_a_one_input_spec_has_nothing_to_plot_against(tmp_path):
    spec = tiny_spec(n_inputs=1)
    with pytest.raises(SpecError, match=ONE_INPUT):
        default_axes(spec)
    with pytest.raises(SpecError, match=ONE_INPUT):
        render_decision_map(
            spec, tiny_network(1), Table.undecided(spec), tmp_path / "map.png", x_input="x0", y_input="x0"
        )
    assert os.listdir(tmp_path) == []


def test_a_table_of_another_grid_is_refused(tmp_path):
    spec, other = tiny_spec(), tiny_spec(x2_edges=(0.0, 2.0))
    message = (
        r"^the table's grid \(shape \(2, 2, 1\), inputs x0, x1, x2\) is not the grid of spec 'tiny3' "
        r"\(shape \(2, 2, 2\)\); distil the table from this spec$"
    )
    with pytest.raises(SpecError, match=message):
        render_tiny(tmp_path / "map.png", spec, table=Table.undecided(other))
    assert os.listdir(tmp_path) == []


def test_a_network_that_does_not_fit_the_spec_is_refused(tmp_path):
    message = (
        r"^/nonexistent/tiny3\.spec\.json: the spec has 3 inputs and 3 outputs but the network \(in memory\) "
        r"has 2 and 3; "
    )
    with pytest.raises(SpecError, match=message):
        render_tiny(tmp_path / "map.png", network=tiny_network(2))
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------- writing


WRITE_FAILURE = r"^{path}: cannot write the decision map \(.+\); check that the folder exists and is writable$"


def test_a_missing_folder_is_a_report_error_and_creates_nothing(tmp_path):
    target = tmp_path / "absent" / "map.png"
    with pytest.raises(ReportError, match=WRITE_FAILURE.format(path=re.escape(str(target)))):
        render_tiny(target)
    assert os.listdir(tmp_path) == []


def test_a_directory_in_the_way_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "map.svg"
    target.mkdir()
    with pytest.raises(ReportError, match=WRITE_FAILURE.format(path=re.escape(str(target)))):
        render_tiny(target)
    assert os.listdir(tmp_path) == ["map.svg"] and target.is_dir()


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "map.png"
    target.write_bytes(b"old picture")
    written = []

    def failing_replace(source, destination):
        written.append(os.path.getsize(source))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_decision_map.os, "replace", failing_replace)
    with pytest.raises(ReportError, match=WRITE_FAILURE.format(path=re.escape(str(target)))):
        render_tiny(target)
    assert written and written[0] > 1000
    assert os.listdir(tmp_path) == ["map.png"] and target.read_bytes() == b"old picture"


def test_a_failure_while_drawing_writes_nothing(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("renderer broke")

    monkeypatch.setattr(_decision_map, "token_colours", broken)
    with pytest.raises(RuntimeError, match="^renderer broke$"):
        render_tiny(tmp_path / "map.png")
    assert os.listdir(tmp_path) == []


def slice_tokens(spec, table, x_input, y_input, fixed):
    """The distinct tokens of the exact cells in the slice through `fixed`, found cell by cell."""
    grid = table.grid
    names = list(grid.names)
    x, y = names.index(x_input), names.index(y_input)
    point = np.array([fixed.get(n, (item.min + item.max) / 2) for n, item in zip(names, spec.inputs)])
    tokens = set()
    for xc in (grid.edges[x][:-1] + grid.edges[x][1:]) / 2:
        for yc in (grid.edges[y][:-1] + grid.edges[y][1:]) / 2:
            point[x], point[y] = xc, yc
            cell = grid.cell_of(point)
            if table.status[cell] == EXACT:
                tokens.add(int(table.proposal[cell]))
    return tokens


def test_the_busiest_slice_shows_at_least_as_many_tokens_as_any_other(example, distilled):
    spec, _ = example
    fixed = _decision_map.busiest_slice(spec, distilled, "temperature", "queue_depth")
    assert set(fixed) == {"compute_util", "mem_bw_util", "l2_miss_rate"}
    best = len(slice_tokens(spec, distilled, "temperature", "queue_depth", fixed))
    rng = np.random.default_rng(3)
    for _ in range(40):
        other = {name: float(rng.uniform(0, 100)) for name in fixed}
        assert len(slice_tokens(spec, distilled, "temperature", "queue_depth", other)) <= best
    assert best > len(slice_tokens(spec, distilled, "temperature", "queue_depth", {}))


@pytest.mark.slow
def test_held_back_cells_are_drawn_apart_from_the_conservative_ones(tmp_path):
    spec = tiny_spec()
    table = hand_table(spec, only_x2_bin=1)
    grid = Grid.from_spec(spec)
    in_slice = [c for c in range(grid.n_cells) if grid.multi_index(c)[2] == 1 and table.status[c] != EXACT]
    render_tiny(tmp_path / "held.svg", spec, table=table, fixed={"x2": 1.5}, held_back={in_slice[0]: A})
    text = (tmp_path / "held.svg").read_text()
    held_label = "cross-hatched: held back, the network's proved A is forbidden here; holds KEEP"
    assert held_label == _decision_map.HELD_BACK_LABEL.format(proved="A", token="KEEP")
    assert held_label in text and CONSERVATIVE_LABEL.format(token="KEEP") in text
    render_tiny(tmp_path / "plain.svg", spec, table=table, fixed={"x2": 1.5})
    assert "held back" not in (tmp_path / "plain.svg").read_text()
    elsewhere = [c for c in range(grid.n_cells) if grid.multi_index(c)[2] == 0]
    render_tiny(tmp_path / "outside.svg", spec, table=table, fixed={"x2": 1.5}, held_back=dict.fromkeys(elsewhere, A))
    assert "held back" not in (tmp_path / "outside.svg").read_text()


def test_held_back_cells_are_cross_hatched_one_by_one_and_not_counted_as_plain_conservative(tmp_path, drawn):
    spec = tiny_spec()
    table = hand_table(spec, only_x2_bin=1)
    grid = Grid.from_spec(spec)
    in_slice = [c for c in range(grid.n_cells) if grid.multi_index(c)[2] == 1 and table.status[c] != EXACT]
    assert len(in_slice) == 2
    render_tiny(tmp_path / "held.png", spec, table=table, fixed={"x2": 1.5}, held_back={in_slice[0]: A, 0: B})
    axes = table_axes(drawn[-1])
    (held,) = by_gid(axes, "held-back-cells")
    (plain,) = by_gid(axes, "conservative-cells")
    assert held.get_hatch() == _decision_map.HELD_BACK_HATCH != plain.get_hatch()
    assert (len(held.get_paths()), len(plain.get_paths())) == (1, 1)
    # the legend names the held-back token of the cells in view only (cell 0 is in another slice)
    assert "cross-hatched: held back, the network's proved A is forbidden here; holds KEEP" in legend_labels(drawn[-1])


def test_the_distill_report_says_what_the_marks_mean_and_names_rules_on_fixed_inputs(distilled_example):
    from certfsm.fsm._distill_report import _markdown

    spec, run, _ = distilled_example
    fixed = {"l2_miss_rate": 60.0, "temperature": 90.0, "queue_depth": 40.0}
    picture = {"file": "m.png", "x": "compute_util", "y": "mem_bw_util", "fixed": fixed, "agreement": 1.0}
    text = _markdown({**run.summary, "decision_maps": [picture]}, spec)
    section = text[text.index("## Decision map: compute_util against mem_bw_util") :]
    for words in (
        "A hatched (///) cell holds the conservative token KEEP because the network's decision was not proved",
        "so a different colour on the right is no disagreement",
        "A cross-hatched (xx) cell is held back",
        "A dashed box is a legality rule's box in the two drawn inputs, labelled with the rule's name",
        "- rule no-int4-when-hot (forbids INT4) also needs temperature >= 85 degC; held at 90 degC: applies in the "
        "whole slice",
        "- rule no-offload-when-queue-full (forbids OFFLOAD_CPU) also needs queue_depth >= 56 requests; held at 40 "
        "requests: does not apply in this slice",
    ):
        assert words in section, words
    default = run.summary["decision_maps"][0]
    assert (default["x"], default["y"]) == ("temperature", "queue_depth")
    plain = _markdown(run.summary, spec)
    assert "Rules that also restrict the inputs held fixed" not in plain and "A dashed box" in plain


# ----------------------------------------------------------------- envelope ends that float64 does not hold


def test_an_envelope_minimum_whose_float_lies_below_it_is_drawn_and_a_fixed_value_there_is_refused(tmp_path):
    """-0.1 means -1/10 exactly; float64(-0.1) is just below it, out of the envelope as the table reads it. The
    map used to place x and y at float64(minimum), whose cell is out of the envelope, and stopped on it (an
    ACAS Xu spec with rho from -0.3284228772 did, at the end of a 35-minute distillation)."""
    spec = tiny_spec(x2_edges=(-0.1, 1.0, 2.0))
    assert Grid.from_spec(spec).cell_of(np.array([[0.25, 0.25, -0.1]]))[0] < 0  # the premise
    table = hand_table(spec)
    for x_input, y_input, fixed in (("x2", "x0", {"x1": 0.25}), ("x0", "x1", {"x2": 0.5})):
        result = render_decision_map(
            spec, tiny_network(), table, tmp_path / f"{x_input}.png", x_input=x_input, y_input=y_input, fixed=fixed
        )
        assert result.cells_shown == 4 and os.path.getsize(tmp_path / f"{x_input}.png") > 0
    message = (
        r"^fixed\['x2'\]=-0\.1 is outside the envelope \[-0\.1, 2\] of input x2 \(as a float64 it is "
        r"-0\.1000000000000000055511151231257827021181583404541015625, beyond the decimal the spec means\); "
        r"give a value in that range$"
    )
    with pytest.raises(SpecError, match=message):
        render_tiny(tmp_path / "refused.png", spec, table=table, fixed={"x2": -0.1})
    assert not (tmp_path / "refused.png").exists()
