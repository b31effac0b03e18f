"""The step function's faster twin: `Machine.step` memoised per (state, input class), one list lookup per cycle.

Why: `Machine.step` is the rule text the machine proofs cover, and it is
written to be read, not to be fast (a few hundred nanoseconds of
interpreted branches and a new `State` per call). The runtime decides
every control cycle, so it asks this table instead, which only ever
returns what `Machine.step` itself returned.

Why the table equals `Machine.step` (tests/runtime/test_step_table.py
checks it on every reachable state crossed with every input class, on the
example and on a synthetic machine, and on random runs): `machine.step`
is a pure function of

- the state (all four registers: current token, candidate, count,
  cooldown; the table is keyed by the whole `State`);
- whether the cell is in the envelope;
- for a reading in the envelope, its leaf's proposal and `allowed` mask
  (docs/semantics.md, "State machine": on a flat table, or in a cell
  that is not refined, the leaf is the cell), and nothing else of it
  (`exact` only says how the proposal was proved; `step` never reads it).
  Leaves with the same (proposal, allowed mask) are one *cell class*,
  whichever cell or tree they lie in, so the number of classes stays at
  most 16 * 2^16 however many leaves a refined table has; out of the
  envelope is one more;
- `sla_ok`;
- the override: `step` only asks whether it is None, whether it is in
  `params.overridable` and then which token it is. So the *override
  classes* are: none, each overridable token, and "any other value"
  (all refused alike as OVERRIDE_REFUSED_NOT_OVERRIDABLE, the value is
  not read further).

Two calls whose arguments agree on all of these get the same result, so
`step` called once on a representative of each (state, cell class,
sla_ok, override class) and remembered answers every call. The table
fills lazily, on the first visit of each pair, by calling
`certfsm.machine.step` on the class's (proposal, allowed row) and the
other arguments of that visit (`Machine.step` and `Machine.step_leaf`
call it so too); a state no run has
reached costs nothing (a hot swap can start from a state the new
machine's initial state never reaches; it is handled the same way).

A *node* is the row of one state: ``node[mode][cell_class]`` is the
`Transition` out of that state, None until first visited, where
``mode = sla_ok_bit + 2 * override_class`` (mode 1, SLA ok and no
override, is the common case). Filling a slot twice from two threads
stores equal transitions, and nodes are interned with `dict.setdefault`,
so a table may be shared between threads without a lock of its own.

Memory stays bounded whatever the machine: a machine with many tokens
and long confirm and cooldown counts has millions of states, and a
long run may visit many of them. When the interned nodes would pass
`max_bytes`, the table starts a new generation of nodes (a new intern
dictionary). Transitions filled later lead into the new generation only,
so a runner leaves the old one behind and it is freed; at most about two
generations are alive. Every node, old or new, still only holds
`Machine.step`'s own results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from certfsm.fast_binning import LeafWalk, compile_leaf_walks
from certfsm.machine import Machine, Reason, State, step

if TYPE_CHECKING:
    from certfsm import Leaf

REFINED_CELL = -1
"""`StepTable.cell_class` of a refined cell: its class is its leaf's (`class_of_leaf`, `walks`)."""

Node = list[list["Transition | None"]]
"""The row of one state: ``node[mode][cell_class]`` (module docstring)."""


class Transition(NamedTuple):
    """One memoised `Machine.step` result, with what a decision reports precomputed.

    `node` is the next state's row, so the caller keeps it and looks up
    the next cycle there directly.
    """

    token_name: str
    token: int
    code: int
    reason: Reason
    state: State
    node: Node


class StepTable:
    """`Machine.step` for one machine as a lazily filled table (see the module docstring for why it is equal).

    `cell_class[cell]` is the class of a cell that is not refined, and
    REFINED_CELL for a refined one, whose leaves have theirs:
    ``walks[cell](reading)`` (`walks_fixed`) is the class of the leaf that
    holds a list or tuple of floats (of ints, fixed point;
    `certfsm.fast_binning.compile_leaf_walks`), `class_of_leaf` that of any leaf.
    Index -1 (OUT_OF_ENVELOPE) is the out-of-envelope class, the last one.
    """

    __slots__ = (
        "machine",
        "cell_class",
        "n_classes",
        "max_nodes",
        "walks",
        "walks_fixed",
        "_class_of_pair",
        "_representative",
        "_override_class",
        "_other_override",
        "_nodes",
        "_modes",
    )

    def __init__(self, machine: Machine, max_bytes: int = 64 << 20) -> None:
        self.machine = machine
        classes: dict[tuple[int, int], int] = {}
        representative: list[tuple[int, int] | None] = []  # per class (proposal, allowed mask); None: out

        def class_of(pair: tuple[int, int]) -> int:
            index = classes.get(pair)
            if index is None:
                index = classes[pair] = len(representative)
                representative.append(pair)
            return index

        refinement = machine.refinement
        cell_class = [
            REFINED_CELL if refinement is not None and refinement.tree_of(cell) is not None else class_of(pair)
            for cell, pair in enumerate(zip(machine.proposal, machine.allowed))
        ]
        leaf_class = {
            cell: [class_of((leaf.token, leaf.allowed)) for leaf in tree.leaves]
            for cell, tree in (() if refinement is None else zip(refinement.cells, refinement.trees))
        }
        representative.append(None)
        cell_class.append(len(classes))  # at index -1: OUT_OF_ENVELOPE
        self.cell_class = tuple(cell_class)
        self.n_classes = len(representative)
        self._representative = tuple(representative)
        self._class_of_pair = classes
        self.walks: dict[int, LeafWalk] = compile_leaf_walks(machine, lambda cell, leaf: leaf_class[cell][leaf])
        self.walks_fixed: dict[int, LeafWalk] = compile_leaf_walks(
            machine, lambda cell, leaf: leaf_class[cell][leaf], fixed=True
        )
        overridable = sorted(machine.params.overridable)
        self._override_class = {token: k + 1 for k, token in enumerate(overridable)}
        self._other_override = len(overridable) + 1
        self._modes = 2 * (len(overridable) + 2)
        self._nodes: dict[State, Node] = {}
        node_bytes = 64 + self._modes * (64 + 8 * self.n_classes) + 200  # the rows, and the state keying them
        self.max_nodes = max(16, max_bytes // node_bytes)

    # ------------------------------------------------------------- lookups

    def node(self, state: State) -> Node:
        """The row of `state` (created empty on first use)."""
        nodes = self._nodes
        node = nodes.get(state)
        if node is None:
            if len(nodes) >= self.max_nodes:
                nodes = self._nodes = {}  # a new generation (module docstring)
            node = nodes.setdefault(state, [[None] * self.n_classes for _ in range(self._modes)])
        return node

    def mode(self, sla_ok: bool, override: int | None) -> int:
        """The row index of (sla_ok, override class): 1 for SLA ok and no override."""
        if override is None:
            return 1 if sla_ok else 0
        return (1 if sla_ok else 0) + 2 * self._override_class.get(override, self._other_override)

    def class_of_leaf(self, leaf: Leaf | None) -> int:
        """The class of a leaf (`Machine.leaf_of`; None: out of the envelope)."""
        return self.n_classes - 1 if leaf is None else self._class_of_pair[leaf.token, leaf.allowed]

    def transition(
        self, state: State, node: Node, mode: int, cell_class: int, sla_ok: bool, override: int | None
    ) -> Transition:
        """What `machine.step_leaf(state, leaf, sla_ok, override)` returns for a leaf of class `cell_class`, from
        `node` = `self.node(state)`.

        `mode` must be `self.mode(sla_ok, override)`. The fast path of a
        caller inlines the first two lines.
        """
        found = node[mode][cell_class]
        if found is None:
            found = self._fill(state, node, mode, cell_class, sla_ok, override)
        return found

    def step(
        self, state: State, cell: int, sla_ok: bool = True, override: int | None = None
    ) -> tuple[State, int, Reason]:
        """Same signature and result as `Machine.step`, through the table; `cell` is what `cell_of` returns
        (a cell that is not refined, or OUT_OF_ENVELOPE; a refined cell decides by its leaves, `step_leaf`)."""
        cell_class = self.cell_class[cell]
        if cell_class == REFINED_CELL:
            raise ValueError(f"cell {cell} is refined: its leaves decide; step on the reading's leaf with step_leaf")
        found = self.transition(state, self.node(state), self.mode(sla_ok, override), cell_class, sla_ok, override)
        return found.state, found.token, found.reason

    def step_leaf(
        self, state: State, leaf: Leaf | None, sla_ok: bool = True, override: int | None = None
    ) -> tuple[State, int, Reason]:
        """Same signature and result as `Machine.step_leaf`, through the table."""
        mode = self.mode(sla_ok, override)
        found = self.transition(state, self.node(state), mode, self.class_of_leaf(leaf), sla_ok, override)
        return found.state, found.token, found.reason

    def _fill(
        self, state: State, node: Node, mode: int, cell_class: int, sla_ok: bool, override: int | None
    ) -> Transition:
        machine = self.machine
        pair = self._representative[cell_class]
        if pair is None:
            next_state, token, reason = step(machine.params, state, None, None, False, sla_ok, override)
        else:
            row = tuple(bool(pair[1] >> k & 1) for k in range(machine.params.n_tokens))
            next_state, token, reason = step(machine.params, state, pair[0], row, True, sla_ok, override)
        found = Transition(
            machine.tokens[token], token, machine.params.codes[token], reason, next_state, self.node(next_state)
        )
        node[mode][cell_class] = found
        return found

    # ------------------------------------------------------------- enumeration (tests, exports)

    def input_classes(self) -> list[tuple[Leaf | None, bool, int | None]]:
        """One representative (leaf, sla_ok, override) per input class, for `step_leaf`: a leaf of every cell
        class (None out of the envelope), both SLA verdicts, no override, each overridable token and one value that
        is not (the smallest non-overridable int)."""
        from certfsm import Leaf, LeafStatus

        params = self.machine.params
        other = next(k for k in range(-1, params.n_tokens + 1) if k not in params.overridable)
        overrides: list[int | None] = [None, *sorted(params.overridable), other]
        leaves = [None if pair is None else Leaf(LeafStatus.EXACT, *pair) for pair in self._representative]
        return [(leaf, sla_ok, override) for leaf in leaves for sla_ok in (True, False) for override in overrides]

    def reachable_states(self) -> list[State]:
        """Every state reachable from the initial state under any inputs, breadth first (fills the table)."""
        start = self.machine.initial_state()
        seen, frontier = {start: None}, [start]
        classes = self.input_classes()
        while frontier:
            following = []
            for state in frontier:
                for leaf, sla_ok, override in classes:
                    next_state = self.step_leaf(state, leaf, sla_ok, override)[0]
                    if next_state not in seen:
                        seen[next_state] = None
                        following.append(next_state)
            frontier = following
        return list(seen)
