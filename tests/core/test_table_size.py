"""What `certfsm spec check` says a grid costs: cells, the table's ROM bits, the distill cost class, the limit."""

from __future__ import annotations

import json
import re

import pytest

from certfsm import MAX_CELLS, SpecError, TableSize, check_grid_size, describe_spec, load_onnx, load_spec
from certfsm._table_size import COST_CLASSES, distill_cost
from certfsm.examples import example_spec_path

from cli_in_process import run_main


def spec_with_bins(tmp_path, bins, frac_bits=True):
    """The example spec with `bins` equal-width bins per input (and, unless told, its frac_bits)."""
    data = json.loads(example_spec_path("coadapt").read_text())
    data["model"] = str(example_spec_path("coadapt").parent / data["model"])
    data["legality_rules"] = []
    for item, count in zip(data["inputs"], bins):
        del item["edges"]
        item["bins"] = count
        if not frac_bits:
            item.pop("frac_bits", None)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    return path


def test_spec_check_prints_the_examples_cells_table_bits_and_cost_class():
    code, out, err = run_main("spec", "check", example_spec_path("coadapt"))
    assert code == 0, err
    lines = out.splitlines()
    grid = lines.index("grid: 8 x 9 x 4 x 5 x 5 = 7200 cells")
    assert lines[grid + 1] == (
        "table: 7,200 cells x (3 token bits + 5 mask bits) = 57,600 bits (56.2 kbit) of ROM, as export-verilog lays "
        "it out"
    )
    assert re.match(
        r"^distill cost: seconds \(an estimate: about 2\.2 s of one core for 7,200 cells of a 16-ReLU network; cells "
        r"on decision boundaries can take far longer\)$",
        lines[grid + 2],
    ), lines[grid + 2]
    assert not any(line.startswith("hardware:") for line in lines), "every input of the example has frac_bits"


def test_spec_check_says_what_a_large_grid_costs_and_which_inputs_the_hardware_needs_frac_bits_for(tmp_path):
    code, out, err = run_main("spec", "check", spec_with_bins(tmp_path, [20, 20, 20, 20, 20], frac_bits=False))
    assert code == 0, err
    lines = out.splitlines()
    assert "grid: 20 x 20 x 20 x 20 x 20 = 3200000 cells" in lines
    assert (
        "table: 3,200,000 cells x (3 token bits + 5 mask bits) = 25,600,000 bits (25,000.0 kbit) of ROM, as "
        "export-verilog lays it out"
    ) in lines
    assert any(
        line.startswith("distill cost: minutes (an estimate: about 16 min of one core for 3,200,000") for line in lines
    )
    assert (
        "hardware: export-verilog and export-c will refuse this spec's artifact: inputs compute_util, mem_bw_util, "
        "l2_miss_rate, temperature, queue_depth have no frac_bits; give each input frac_bits f (its hardware value v "
        "means v * 2^-f) before you distil"
    ) in lines


def test_one_input_without_frac_bits_is_named_alone(tmp_path):
    data = json.loads(example_spec_path("coadapt").read_text())
    data["model"] = str(example_spec_path("coadapt").parent / data["model"])
    del data["inputs"][3]["frac_bits"]
    (tmp_path / "spec.json").write_text(json.dumps(data))
    lines = describe_spec(load_spec(tmp_path / "spec.json"))
    assert [line for line in lines if line.startswith("hardware:")] == [
        "hardware: export-verilog and export-c will refuse this spec's artifact: input temperature has no frac_bits; "
        "give each input frac_bits f (its hardware value v means v * 2^-f) before you distil"
    ]
    assert not any(line.startswith("distill cost:") for line in lines), "no network given, no estimate"


@pytest.mark.parametrize(
    "bins, shown",
    [
        ([10_000] * 5, r"about 10\^20"),
        ([2049, 2048, 1, 1, 1], "4,196,352"),
    ],
)
def test_spec_check_refuses_a_grid_over_max_cells_in_one_line_naming_each_inputs_bins(tmp_path, bins, shown):
    path = spec_with_bins(tmp_path, bins)
    code, out, err = run_main("spec", "check", path)
    named = ", ".join(
        f"{name} {count}"
        for name, count in zip(["compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth"], bins)
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert re.match(
        rf"^certfsm: error: {re.escape(str(path))}: the grid has {shown} cells \(bins: {re.escape(named)}\), more "
        r"than the 4,194,304 a table holds; give the inputs fewer bins or edges \(their product is the cell count\)$",
        err.strip(),
    ), err


def test_the_check_counts_cells_not_bins(tmp_path):
    ok = load_spec(spec_with_bins(tmp_path, [2048, 2048, 1, 1, 1]))
    assert TableSize.of(ok).n_cells == MAX_CELLS
    check_grid_size(ok)
    over = load_spec(spec_with_bins(tmp_path, [2048, 2048, 2, 1, 1]))
    with pytest.raises(SpecError, match="more than the 4,194,304 a table holds"):
        check_grid_size(over)


@pytest.mark.parametrize(
    "n_tokens, token_bits",
    [(2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (16, 4)],
)
def test_a_rom_word_is_the_largest_output_index_and_one_mask_bit_per_token(n_tokens, token_bits):
    size = TableSize((3, 5), n_tokens)
    assert (size.n_cells, size.token_bits, size.mask_bits) == (15, token_bits, n_tokens)
    assert size.bits == 15 * (token_bits + n_tokens)


def test_the_cost_rule_matches_the_distills_it_was_calibrated_on():
    """The docstring's three distills, per core, each within a factor of three of the rule."""
    for cells, relus, seconds in [(7_200, 16, 2.0), (100_000, 64, 1200.0), (512, 300, 410.0)]:
        estimate = distill_cost(cells, relus).seconds
        assert seconds / 3 < estimate < seconds * 3, (cells, relus, estimate)


@pytest.mark.parametrize(
    "cells, relus, cost_class",
    [
        (7_200, 16, "seconds"),
        (100_000, 64, "minutes"),
        (4_352, 300, "minutes"),
        (40_000, 300, "hours"),
        (MAX_CELLS, 300, "days or more"),
    ],
)
def test_the_cost_class_follows_the_estimate(cells, relus, cost_class):
    cost = distill_cost(cells, relus)
    assert cost.cost_class == cost_class
    limits = [limit for limit, _ in COST_CLASSES]
    names = [name for _, name in COST_CLASSES]
    index = names.index(cost_class)
    assert (limits[index - 1] if index else 0) <= cost.seconds < limits[index]


def test_the_estimate_needs_the_network_and_grows_with_it():
    spec = load_spec(example_spec_path("coadapt"))
    network = load_onnx(spec.model_path)
    assert sum(network.hidden_sizes) == 16
    assert distill_cost(1000, 32).seconds > distill_cost(1000, 16).seconds > distill_cost(500, 16).seconds
