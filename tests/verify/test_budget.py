"""A work budget makes `check`'s ``proved`` a fact of the search, not of the clock (issue 9 part 4)."""

from __future__ import annotations

import importlib.util

import pytest

from certfsm import EngineError
from certfsm.verify import WALL_CLOCK_GUARD, WorkBudget, check, solve_text

from test_check import BUMPY, BUMPY_SAFE, XOR, XOR_UNSAFE, _force_pool

needs_z3 = pytest.mark.skipif(importlib.util.find_spec("z3") is None, reason="z3-solver is not installed")


def test_a_budget_that_covers_the_search_tree_proves_and_one_box_less_does_not():
    unbudgeted = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=1)
    tree = unbudgeted.stats["boxes"]
    assert unbudgeted.is_proved and tree > 1
    enough = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=1, budget=WorkBudget(boxes=tree))
    assert enough.is_proved and enough.stats["boxes"] == tree and WALL_CLOCK_GUARD not in enough.stats
    short = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=1, budget=WorkBudget(boxes=tree - 1))
    assert short.verdict == "unknown" and short.reason.startswith("work budget spent (")
    assert WALL_CLOCK_GUARD not in short.stats


def test_the_same_budget_gives_the_same_search_inline_and_in_two_worker_processes(monkeypatch):
    """The tree of boxes is a fact of the network and property: its size does not depend on who bounds which box."""
    budget = WorkBudget(boxes=10_000)
    one = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=1, budget=budget)
    _force_pool(monkeypatch)
    two = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=2, budget=budget)
    assert one.verdict == two.verdict == "proved" and two.stats["workers"] == 2
    assert (one.engine, one.stats["boxes"]) == (two.engine, two.stats["boxes"])


def test_the_wall_clock_guard_says_it_fired():
    result = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=1e-6, jobs=1, budget=WorkBudget())
    assert result.verdict == "unknown" and result.stats[WALL_CLOCK_GUARD] is True
    assert result.reason.startswith("the wall-clock guard fired before the work budget was spent: timeout after ")


def test_a_budget_does_not_hide_a_counterexample():
    assert check(XOR, XOR_UNSAFE, timeout=30, jobs=1, budget=WorkBudget(boxes=1)).verdict == "violated"


@pytest.mark.parametrize(
    "engine, budget, message",
    [
        (
            "z3",
            WorkBudget(),
            r"^budget=WorkBudget\(.*\) with engine='z3': a work budget is a WorkBudget, for engine "
            r"'auto' or 'bounds'; give budget=None or engine='auto'$",
        ),
        ("auto", 100, r"^budget=100 with engine='auto': a work budget is a WorkBudget"),
    ],
)
def test_a_budget_is_refused_where_it_means_nothing(engine, budget, message):
    with pytest.raises(EngineError, match=message):
        check(BUMPY, BUMPY_SAFE, engine=engine, timeout=30, jobs=1, budget=budget)


@pytest.mark.parametrize("field", ["boxes", "engine_queries", "z3_rlimit"])
def test_a_budget_count_must_be_a_positive_integer(field):
    with pytest.raises(ValueError, match=rf"^WorkBudget\.{field}=0 is not a positive integer; give e\.g\. {field}="):
        WorkBudget(**{field: 0})


HARD = "(declare-const x Int)(declare-const y Int)(assert (> x 1))(assert (> y 1))(assert (= (* x y) 1000003))"


@needs_z3
def test_z3_with_an_rlimit_names_the_spent_budget_and_the_guard_apart():
    answer, _, reason = solve_text(HARD + "(check-sat)", 600.0, rlimit=1000)
    assert (answer, reason) == ("unknown", "z3 used up its rlimit 1000 (a deterministic budget)")
    answer, _, reason = solve_text("(declare-const x Int)(assert (> x 1))(check-sat)", 600.0, rlimit=10_000_000)
    assert answer == "sat"
