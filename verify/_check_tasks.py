"""The tasks of `_check`'s branch and bound, as `_pool` runs them (inline or in worker processes).

A task is a tuple whose first item is its kind; `run_task(context, task)`
returns:

- ``("search", boxes, seconds, depth_limit, attack, engine_unstable)``:
  the `_split.Outcome` of a stretch of branch and bound on `boxes`
  (`attack`: try the attack points of `_split` too; boxes with at most
  `engine_unstable` unstable ReLUs go to the box engine at once);
- ``("attack", seed, seconds, region)``: ``(candidate or None, seconds
  taken)`` of a falsification run, on the whole box (`region` None) or
  aimed at open boxes (a `_falsify.Region`);
- ``("engine", box, seconds, rlimit)``: the `Result` of
  `_box_engine.decide_box` on the one-box `box`, restricted to the
  disjuncts still open on it (proved only by an exact Z3 UNSAT; `rlimit`
  None, or a `WorkBudget`'s Z3 resource count).

The context is ``(network, prop, objectives, complete)``, shared by every
task of one search. Answers only report: `_check` alone decides.
"""

from __future__ import annotations

import time

from . import _falsify, _split
from ._box_engine import decide_box


def run_task(context: tuple, task):
    """Body of one task of kind ``task[0]``, given the search's context."""
    network, prop, objectives, complete = context
    if task[0] == "search":
        _, boxes, seconds, depth_limit, attack, engine_unstable = task
        return _split.search(
            network,
            prop,
            objectives,
            boxes,
            time.monotonic() + seconds,
            engine_depth=depth_limit,
            attack=attack,
            engine_unstable=engine_unstable,
        )
    if task[0] == "attack":
        _, seed, seconds, region = task
        begun = time.monotonic()
        return _falsify.falsify(network, prop, seconds, seed, region), time.monotonic() - begun
    _, box, seconds, rlimit = task
    still_open = tuple(conjunction for k, conjunction in enumerate(prop.unsafe) if box.open[0, k])
    return decide_box(network, prop.restricted(box.lower[0], box.upper[0], still_open), box.hidden[0], seconds, rlimit)
