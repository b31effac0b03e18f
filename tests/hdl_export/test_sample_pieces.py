"""The sample claim in pieces (`hdl_export/_pieces.py`): the boxes tile the grid.

The tiny refined machine has 13 ROM words (8 cells, 5 leaves under cells 1 and 5); a piece size of 4 words splits
it into `outside` and five boxes: cell 0, cell 1 (4 words), cells 2-3, cells 4-5 (cell 5's 2 leaves), cells 6-7.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from refined_machines import refine_at_random, tiny_refined_machine
from test_hdl_simulation import small_machines
from tiny_machine import tiny_machine

from certfsm.hdl_export._pieces import PIECE_WORDS, cell_words, sample_pieces

TINY_PIECE = 4
"""ROM words per piece that split the tiny refined machine into five boxes."""


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
