"""Explicit-state enumeration of the machine, in plain Python: the second opinion next to Z3.

A node is a machine `State` plus one history variable, `since_switch`:
the number of cycles since the last switch to a non-conservative token,
saturating at cooldown_cycles (min(1, cooldown_cycles) right after such
a switch; cooldown_cycles, meaning "long enough", initially). Breadth
first from the initial node, every node meets every input of a finite
alphabet: each (proposal, allowed row) class the machine can see, in
envelope, with sla_ok in {True, False} and override in {None}, every
token and one integer that names no token, and the same out of
envelope. The machine reads a cell only through its class, and every
override that is not an overridable token is refused alike (the one
non-token integer stands for all of them even when every token is
overridable), so this alphabet covers every input the machine can meet
in a deployment of that table; the enumeration is complete, and a
property that holds on every transition is ``proved`` (engine
"explicit").

Every transition is judged by `transition_violations`, the one concrete
statement of the properties; the Z3 prover uses it too, to confirm its
counterexample traces by replay.
"""

from __future__ import annotations

import itertools
import numbers
import time
from collections import deque
from dataclasses import dataclass

from certfsm import MACHINE_PROPERTIES

from ._machine import MachineInput, MachineParams, Proof, Reason, State, Trace, initial_state, replay, step

PROPERTY_DESCRIPTIONS = {
    "output-legal": "the emitted token is a legal token and its 4-bit code is a legal token's code",
    "output-allowed": "in envelope, the emitted token is allowed in the current cell, whatever the history",
    "fallback-conservative": "out of envelope or with the SLA violated, the conservative token is emitted that cycle",
    "switch-cooldown": "two switches to non-conservative tokens are at least cooldown_cycles cycles apart",
    "total-deterministic": "every input gives one well-formed next state, token (the new current) and reason, "
    "the same every time",
    "override-allowed": "with an override present the emitted token is allowed in the cell, and reason OVERRIDE "
    "means the emitted token is the requested overridable token",
}

Node = tuple[State, int]
_REASON_VALUES = frozenset(int(r) for r in Reason)
_FREE_ROWS_LIMIT = 4096


def initial_node(params: MachineParams) -> Node:
    return initial_state(params), params.cooldown_cycles


def next_since(params: MachineParams, node: Node, output: int) -> int:
    state, since = node
    limit = params.cooldown_cycles
    if output != state.current and output != params.conservative:
        return min(1, limit)
    return min(since + 1, limit)


def is_well_formed(params: MachineParams, state) -> bool:
    """The state domain: registers in range, candidate and count consistent."""
    if not isinstance(state, State):
        return False
    n = params.n_tokens
    no_candidate = state.candidate == -1 and state.count == 0
    candidate = 0 <= state.candidate < n and 1 <= state.count <= params.confirm_cycles
    return 0 <= state.current < n and (no_candidate or candidate) and 0 <= state.cooldown <= params.cooldown_cycles


def transition_violations(params: MachineParams, node: Node, inputs: MachineInput, outcome, again) -> frozenset[str]:
    """Names of the properties broken by one transition from `node` on `inputs`.

    `outcome` and `again` are the results of two calls of the step
    function (or the exception the first call raised).
    """
    if isinstance(outcome, BaseException):
        return frozenset({"total-deterministic"})
    state, since = node
    bad = set()
    after, output, reason = outcome
    in_range = isinstance(output, numbers.Integral) and 0 <= output < params.n_tokens
    if (
        outcome != again
        or not is_well_formed(params, after)
        or not in_range
        or output != after.current
        or reason not in _REASON_VALUES
    ):
        bad.add("total-deterministic")
    if not in_range or output not in params.legal or params.codes[output] not in params.legal_codes:
        bad.add("output-legal")
    permitted = in_range and inputs.in_envelope and bool(inputs.allowed[output])
    if inputs.in_envelope and not permitted:
        bad.add("output-allowed")
    if (not inputs.in_envelope or not inputs.sla_ok) and output != params.conservative:
        bad.add("fallback-conservative")
    if output != state.current and output != params.conservative and since < params.cooldown_cycles:
        bad.add("switch-cooldown")
    if inputs.override is not None and inputs.in_envelope and not permitted:
        bad.add("override-allowed")
    if reason == Reason.OVERRIDE and (
        inputs.override is None or output != inputs.override or inputs.override not in params.overridable
    ):
        bad.add("override-allowed")
    return frozenset(bad)


def _call(step_function, params, state, item: MachineInput):
    try:
        return step_function(params, state, item.proposal, item.allowed, item.in_envelope, item.sla_ok, item.override)
    except Exception as error:  # a crashing step is a totality violation, reported with its trace
        return error


# ------------------------------------------------------------- alphabets


def alphabet(params: MachineParams, rows) -> tuple[MachineInput, ...]:
    """Every input over the (proposal, allowed row) pairs `rows`, plus out of envelope."""
    overrides = (None, *range(params.n_tokens), params.n_tokens)
    inputs = [
        MachineInput(p, tuple(bool(a) for a in row), True, sla, o)
        for p, row in rows
        for sla in (True, False)
        for o in overrides
    ]
    inputs += [MachineInput(None, None, False, sla, o) for sla in (True, False) for o in overrides]
    return tuple(inputs)


def table_rows(table, refinement=None) -> tuple[tuple[int, tuple[bool, ...]], ...]:
    """The (proposal, allowed row) classes of a table; with `refinement` (a `certfsm.Refinement`), those of its
    leaves too, after the cells' and in (proposal, row) order (docs/semantics.md, "State machine": the machine
    reads a leaf only through its class)."""
    rows = tuple((c.proposal, c.allowed) for c in table.classes())
    if refinement is None:
        return rows
    n_out = table.n_outputs
    leaves = {
        (leaf.token, tuple(bool(leaf.allowed >> k & 1) for k in range(n_out)))
        for tree in refinement.trees
        for leaf in tree.leaves
    }
    return rows + tuple(sorted(leaves - set(rows)))


def free_rows(params: MachineParams) -> tuple[tuple[int, tuple[bool, ...]], ...]:
    """Every pair a sound table can show: a legal proposal allowed in its row, the conservative token
    allowed, illegal tokens never allowed (the invariants `check_table` and `prove_table` establish)."""
    legal = sorted(params.legal)
    free = [t for t in legal if t != params.conservative]
    if len(legal) * 2 ** len(free) > _FREE_ROWS_LIMIT:
        raise ValueError(
            f"{len(legal)} legal tokens give too many allowed rows to enumerate; "
            "enumerate the classes of a table instead (table_rows)"
        )
    rows = []
    for bits in itertools.product((False, True), repeat=len(free)):
        row = [False] * params.n_tokens
        row[params.conservative] = True
        for t, bit in zip(free, bits):
            row[t] = bit
        rows += [(p, tuple(row)) for p in legal if row[p]]
    return tuple(rows)


# ------------------------------------------------------------- exploration


@dataclass
class Exploration:
    """The reachable graph: for each node, how it was first reached (parent node, input); first violations."""

    params: MachineParams
    inputs: tuple[MachineInput, ...]
    parent: dict
    first_violation: dict
    transitions: int
    seconds: float
    complete: bool
    edges: dict | None = None

    def path_to(self, node: Node) -> list[MachineInput] | None:
        """Inputs leading from the initial node to `node`, or None when it is not reachable."""
        if node not in self.parent:
            return None
        path = []
        while self.parent[node] is not None:
            node, item = self.parent[node]
            path.append(item)
        return path[::-1]


def explore(
    params: MachineParams, inputs, step_function=step, max_nodes: int = 1_000_000, keep_edges: bool = False
) -> Exploration:
    """Breadth-first search over every reachable node and every input, judging each transition.

    With `keep_edges`, `Exploration.edges` maps (node, input) to
    (next node, token, reason): the explicit transition graph.
    """
    started = time.perf_counter()
    inputs = tuple(inputs)
    start = initial_node(params)
    parent: dict = {start: None}
    first_violation: dict = {}
    frontier = deque([start])
    transitions = 0
    complete = True
    edges = {} if keep_edges else None
    while frontier:
        node = frontier.popleft()
        state = node[0]
        for item in inputs:
            outcome = _call(step_function, params, state, item)
            again = _call(step_function, params, state, item)
            transitions += 1
            for name in transition_violations(params, node, item, outcome, again):
                first_violation.setdefault(name, (node, item))
            if isinstance(outcome, BaseException) or not is_well_formed(params, outcome[0]):
                continue
            after = (outcome[0], next_since(params, node, outcome[1]))
            if edges is not None:
                edges[(node, item)] = (after, outcome[1], outcome[2])
            if after not in parent:
                if len(parent) >= max_nodes:
                    complete = False
                    continue
                parent[after] = (node, item)
                frontier.append(after)
    return Exploration(
        params, inputs, parent, first_violation, transitions, time.perf_counter() - started, complete, edges
    )


def violation_trace(exploration: Exploration, name: str, step_function=step) -> Trace | None:
    """The replayed trace that ends in the first transition found breaking property `name`."""
    if name not in exploration.first_violation:
        return None
    node, item = exploration.first_violation[name]
    inputs = exploration.path_to(node)
    try:
        return replay(exploration.params, [*inputs, item], step_function)
    except Exception:
        return replay(exploration.params, inputs, step_function)


def check_explicit(params: MachineParams, inputs, step_function=step) -> tuple[Proof, ...]:
    """Every machine property by enumeration: one `Proof` (engine "explicit") per name in MACHINE_PROPERTIES."""
    exploration = explore(params, inputs, step_function)
    stats = {
        "nodes": len(exploration.parent),
        "transitions": exploration.transitions,
        "inputs": len(exploration.inputs),
    }
    proofs = []
    for name in MACHINE_PROPERTIES:
        if name in exploration.first_violation:
            node, item = exploration.first_violation[name]
            trace = violation_trace(exploration, name, step_function)
            proofs.append(
                Proof(
                    "violated",
                    "explicit",
                    exploration.seconds,
                    trace=trace,
                    stats=stats,
                    property=name,
                    reason=f"from {node[0]} (since_switch={node[1]}) on {item.describe()}",
                )
            )
        elif not exploration.complete:
            proofs.append(
                Proof(
                    "unknown",
                    "explicit",
                    exploration.seconds,
                    stats=stats,
                    property=name,
                    reason="the reachable state space exceeded the enumeration limit",
                )
            )
        else:
            proofs.append(Proof("proved", "explicit", exploration.seconds, stats=stats, property=name))
    return tuple(proofs)
