"""`SharedPrefix`: queries with one long common beginning answer as each whole text does with `solve_text`."""

from __future__ import annotations

import pytest

from certfsm.verify import SharedPrefix, solve_text

PREFIX = "\n".join(
    [
        "(declare-const x (_ BitVec 8))",
        "(declare-const y (_ BitVec 8))",
        "(define-fun double ((v (_ BitVec 8))) (_ BitVec 8) (bvadd v v))",
        "(assert (= y (double x)))",
        "(assert (bvult x #x40))",
    ]
)
DECLARATIONS = "(declare-const x (_ BitVec 8))\n(declare-const y (_ BitVec 8))"
TAILS = {
    "y is even": "(assert (= ((_ extract 0 0) y) #b1))",  # negated: unsat, y = 2x is even
    "y is below 0x80": "(assert (bvuge y #x80))",  # negated: unsat, x < 0x40
    "y is below 0x70": "(assert (bvuge y #x70))",  # negated: sat, x = 0x38 gives 0x70
}


@pytest.mark.parametrize("tail", TAILS.values(), ids=TAILS.keys())
def test_each_tail_answers_as_the_whole_text_does(tail):
    shared = SharedPrefix(PREFIX, DECLARATIONS)
    answer, model, reason = shared.solve(tail, 30)
    whole, whole_model, _ = solve_text(PREFIX + "\n" + tail + "\n(check-sat)\n", 30)
    assert (answer, reason) == (whole, "")
    if answer == "sat":  # the restated names are the prefix's constants: the model obeys the prefix
        assert model("y") == (2 * model("x")) % 256 and model("x") < 0x40 and model("y") >= 0x70


def test_the_prefix_is_read_once_for_many_tails():
    shared = SharedPrefix(PREFIX, DECLARATIONS)
    answers = [shared.solve(tail, 30)[0] for tail in [*TAILS.values(), *TAILS.values()]]
    assert answers == ["unsat", "unsat", "sat"] * 2


def test_each_tail_is_solved_in_a_context_of_its_own():
    """So that no query's time depends on the ones before it (Z3's heuristics follow what a context has seen)."""
    shared = SharedPrefix(PREFIX, DECLARATIONS)
    first, second = (shared.solve(TAILS["y is below 0x70"], 30)[1] for _ in range(2))
    assert first is not None and second is not None
    assert first._context is not second._context and shared._context not in (first._context, second._context)
    assert (first("x"), first("y")) == (second("x"), second("y"))


def test_a_tail_using_a_name_not_restated_is_unknown_with_z3s_reason():
    answer, model, reason = SharedPrefix(PREFIX, DECLARATIONS).solve("(assert (= (double x) #x02))", 30)
    assert (answer, model) == ("unknown", None) and reason.startswith("z3 error:") and "double" in reason


def test_an_unreadable_prefix_makes_every_tail_unknown_with_the_reason():
    shared = SharedPrefix("(assert (= x", DECLARATIONS)
    answer, model, reason = shared.solve(TAILS["y is even"], 30)
    assert (answer, model) == ("unknown", None) and reason.startswith("z3 error:")
