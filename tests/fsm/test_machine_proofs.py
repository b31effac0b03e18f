"""Z3 proofs of the machine and of the table, their SMT-LIB files, and their agreement with enumeration.

Planted faults (a machine without legality pre-emption, one ignoring the
cooldown, a table proposing an illegal token, a too-weak invariant) must
be caught with a replayed trace, or answered unknown, never proved.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import INVARIANT_QUERIES, MACHINE_PROPERTIES, TABLE_PROPERTIES
from certfsm import load_spec, spec_from_dict
from certfsm.fsm import StepEncoding
from certfsm.fsm._explicit import alphabet, check_explicit, explore, free_rows, table_rows, transition_violations
from certfsm.fsm._grid import Grid
from certfsm.fsm._machine import MachineInput, replay
from certfsm.fsm._machine_proofs import disagreements, prove_machine
from certfsm.fsm._table import Table, allowed_masks, check_table, prove_table
from certfsm.machine import MachineParams, State, step
from certfsm.fsm._explicit import PROPERTY_DESCRIPTIONS, initial_node, is_well_formed, next_since

EXAMPLE = Path(__file__).resolve().parents[2] / "certfsm" / "examples" / "coadapt.spec.json"
ALL_QUERIES = INVARIANT_QUERIES + MACHINE_PROPERTIES


def read_header(text: str) -> dict[str, str]:
    """The ``; key: value`` comment lines before a query file's first command (the first of a key wins).

    Read here, not by verify's own reader, so that this test states the header format the files must keep.
    """
    header: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith(";") and line.strip():
            break
        if match := re.fullmatch(r"; ([A-Za-z0-9_-]+): (.*)", line):
            header.setdefault(match.group(1), match.group(2))
    return header


def read_status(text: str) -> str | None:
    """The query's ``(set-info :status ...)``, or None without one."""
    match = re.search(r"^\(set-info :status (\w+)\)\s*$", text, re.MULTILINE)
    return match.group(1) if match else None


@pytest.fixture(scope="module")
def example():
    return load_spec(EXAMPLE)


def synthetic_table(spec) -> Table:
    """A table over the spec's grid from a simple rule (the real one comes from distillation), kept sound."""
    grid = Grid.from_spec(spec)
    masks = allowed_masks(spec, grid)
    lower, upper = grid.all_cell_bounds()
    centre = (lower + upper) / 2
    proposal = np.zeros(grid.n_cells, dtype=np.int64)
    proposal[centre[:, 0] > 60] = spec.output_index("INT4")
    proposal[centre[:, 4] > 40] = spec.output_index("OFFLOAD_CPU")
    proposal[centre[:, 2] > 70] = spec.output_index("FUSE_CONV")
    proposal[~masks[np.arange(grid.n_cells), proposal]] = spec.conservative_index
    return Table(grid, proposal, np.ones(grid.n_cells, dtype=np.int8), masks)


def verdicts(proofs) -> dict[str, str]:
    return {p.property: p.verdict for p in proofs}


# ---------------------------------------------------------------- the production machine


@pytest.mark.slow
def test_z3_proves_every_property_of_the_example_machine_for_any_sound_table(example, tmp_path):
    params = MachineParams.from_spec(example)
    proofs = prove_machine(params, folder=tmp_path)
    assert verdicts(proofs) == {name: "proved" for name in ALL_QUERIES}
    explicit = check_explicit(params, alphabet(params, free_rows(params)))
    assert verdicts(explicit) == {name: "proved" for name in MACHINE_PROPERTIES}
    assert disagreements(proofs, explicit) == []
    for proof in proofs:
        data = (tmp_path / proof.smt2).read_bytes()
        assert hashlib.sha256(data).hexdigest() == proof.smt2_sha256
        text = data.decode()
        header = read_header(text)
        assert (header["property"], header["verdict"], header["status"], header["engine"]) == (
            proof.property,
            "proved",
            "unsat",
            "z3",
        )
        assert header["machine"] == params.describe() and "since_switch + cooldown >= C + 1" in header["invariant"]
        assert read_status(text) == "unsat" and "(set-info :smt-lib-version 2.6)" in text


def test_every_smt2_file_reruns_to_its_recorded_status_in_a_fresh_solver(example, tmp_path):
    params = MachineParams.from_spec(example)
    prove_machine(params, folder=tmp_path, stable=True)
    files = sorted(tmp_path.glob("machine-*.smt2"))
    assert len(files) == len(ALL_QUERIES)
    for path in files:
        solver = z3.Solver()
        solver.from_file(str(path))
        assert str(solver.check()) == read_status(path.read_text()) == "unsat", path.name
        assert "; seconds:" not in path.read_text() and "; certfsm-version:" not in path.read_text()


@pytest.mark.slow
def test_z3_and_enumeration_agree_for_the_example_with_a_table_over_its_grid(example, tmp_path):
    params = MachineParams.from_spec(example)
    table = synthetic_table(example)
    assert check_table(table, example) == []
    proofs = prove_machine(params, table, tmp_path)
    explicit = check_explicit(params, alphabet(params, table_rows(table)))
    assert verdicts(proofs) == {name: "proved" for name in ALL_QUERIES}
    assert verdicts(explicit) == {name: "proved" for name in MACHINE_PROPERTIES}
    assert disagreements(proofs, explicit) == []
    assert read_header((tmp_path / proofs[0].smt2).read_text())["inputs"] == f"{len(table.classes())} table classes"


# ---------------------------------------------------------------- the encoding is the step function


class _Evaluator:
    """Evaluates the SMT-LIB step encoding on concrete values (one parse, push/pop per sample)."""

    def __init__(self, params, encoding=StepEncoding):
        enc = encoding(params)
        results = [f"(declare-const r_{v} Int)" for v in ("cur", "cand", "cnt", "cd", "since", "out", "reason")]
        results += [
            f"(assert (= r_{v} {t}))"
            for v, t in zip(
                ("cur", "cand", "cnt", "cd", "since", "out", "reason"),
                ("n_cur", "n_cand", "n_cnt", "n_cd", "n_since", "out", "reason"),
            )
        ]
        self.solver = z3.Solver()
        self.solver.from_string("\n".join(enc.declarations() + enc.step_definitions() + results))
        self.n = params.n_tokens

    def __call__(self, state, since, item: MachineInput):
        s = self.solver
        s.push()
        for name, value in zip(
            ("cur", "cand", "cnt", "cd", "since"), (state.current, state.candidate, state.count, state.cooldown, since)
        ):
            s.add(z3.Int(name) == value)
        row = item.allowed if item.allowed is not None else (False,) * self.n
        s.add(z3.Int("prop") == (item.proposal if item.proposal is not None else 0))
        for k, a in enumerate(row):
            s.add(z3.Bool(f"a_{k}") == a)
        s.add(
            z3.Bool("env") == item.in_envelope,
            z3.Bool("sla") == item.sla_ok,
            z3.Bool("ovr_on") == (item.override is not None),
            z3.Int("ovr") == (item.override or 0),
        )
        assert s.check() == z3.sat
        m = s.model()
        values = [m.eval(z3.Int(f"r_{v}")).as_long() for v in ("cur", "cand", "cnt", "cd", "since", "out", "reason")]
        s.pop()
        return State(*values[:4]), values[4], values[5], values[6]


@pytest.mark.slow
def test_the_encoding_equals_the_step_on_every_reachable_transition():
    params = MachineParams(
        n_tokens=3, conservative=1, confirm_cycles=2, cooldown_cycles=2, overridable=frozenset({1, 2}), codes=(7, 3, 12)
    )
    evaluate = _Evaluator(params)
    exploration = explore(params, alphabet(params, free_rows(params)), keep_edges=True)
    assert len(exploration.edges) > 500
    for (node, item), ((after, since), output, reason) in exploration.edges.items():
        assert evaluate(node[0], node[1], item) == (after, since, output, int(reason)), (node, item)


@st.composite
def any_state_and_input(draw):
    """Any state of the domain (reachable or not) and any input, overrides outside the tokens included."""
    params = MachineParams(
        n_tokens=4,
        conservative=0,
        confirm_cycles=3,
        cooldown_cycles=3,
        overridable=frozenset({0, 2}),
        codes=(0, 1, 2, 3),
        legal=frozenset({0, 1, 2}),
    )
    candidate = draw(st.integers(-1, 3))
    state = State(
        draw(st.sampled_from([0, 1, 2])),
        candidate,
        0 if candidate == -1 else draw(st.integers(1, 3)),
        draw(st.integers(0, 3)),
    )
    item = MachineInput(
        draw(st.integers(0, 3)),
        tuple(draw(st.lists(st.booleans(), min_size=4, max_size=4))),
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.one_of(st.none(), st.integers(-2, 6))),
    )
    return params, state, draw(st.integers(0, 3)), item


_EVALUATORS: dict = {}


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(any_state_and_input())
def test_the_encoding_equals_the_step_on_arbitrary_states_and_inputs(sample):
    params, state, since, item = sample
    evaluate = _EVALUATORS.setdefault(params, _Evaluator(params))
    after, output, reason = step(
        params, state, item.proposal, item.allowed, item.in_envelope, item.sla_ok, item.override
    )
    expected = (after, next_since(params, (state, since), output), output, int(reason))
    assert evaluate(state, since, item) == expected


# ---------------------------------------------------------------- planted faults


def unsafe_step(params, state, proposal, allowed_row, in_envelope, sla_ok, override=None):
    """Hysteresis without legality pre-emption: the machine believes its current token is always allowed."""
    if in_envelope:
        allowed_row = tuple(bool(a) or k == state.current for k, a in enumerate(allowed_row))
    return step(params, state, proposal, allowed_row, in_envelope, sla_ok, override)


class UnsafeEncoding(StepEncoding):
    def seen_allowed(self, token):
        return f"(or (= {token} cur) (allowed {token}))"


def hasty_step(params, state, proposal, allowed_row, in_envelope, sla_ok, override=None):
    """A machine that forgets its cooldown when it decides."""
    return step(params, replace(state, cooldown=0), proposal, allowed_row, in_envelope, sla_ok, override)


class HastyEncoding(StepEncoding):
    def step_definitions(self):
        return [
            ("(define-fun cdm () Int 0)" if line.startswith("(define-fun cdm ") else line)
            for line in super().step_definitions()
        ]


def since_along(params: MachineParams, trace) -> list[int]:
    """since_switch before each step of `trace` and after the last one."""
    node = initial_node(params)
    values = [node[1]]
    for s in trace.steps:
        node = (s.after, next_since(params, node, s.output))
        values.append(node[1])
    return values


def _assert_replayed_violation(params, proof, step_function):
    """The trace replays through the machine from the initial state and its last transition breaks the property."""
    assert proof.verdict == "violated" and proof.trace is not None and proof.trace.steps
    assert replay(params, proof.trace.inputs, step_function) == proof.trace
    last = proof.trace.steps[-1]
    since = since_along(params, proof.trace)[-2]
    again = step_function(
        params,
        last.before,
        last.inputs.proposal,
        last.inputs.allowed,
        last.inputs.in_envelope,
        last.inputs.sla_ok,
        last.inputs.override,
    )
    assert proof.property in transition_violations(
        params, (last.before, since), last.inputs, (last.after, last.output, last.reason), again
    )


@pytest.mark.slow
@pytest.mark.parametrize("with_table", [pytest.param(True, marks=pytest.mark.slow), False])
def test_a_machine_without_legality_preemption_is_caught_with_a_trace_by_both(example, with_table):
    params = MachineParams.from_spec(example)
    table = synthetic_table(example) if with_table else None
    proofs = {p.property: p for p in prove_machine(params, table, step_function=unsafe_step, encoding=UnsafeEncoding)}
    rows = table_rows(table) if with_table else free_rows(params)
    explicit = {p.property: p for p in check_explicit(params, alphabet(params, rows), unsafe_step)}
    for name in ("output-allowed", "override-allowed"):
        _assert_replayed_violation(params, proofs[name], unsafe_step)
        _assert_replayed_violation(params, explicit[name], unsafe_step)
        last = proofs[name].trace.steps[-1]
        assert last.inputs.in_envelope and not last.inputs.allowed[last.output]
    assert disagreements(proofs.values(), explicit.values()) == []
    assert all(proofs[name].verdict == "proved" for name in ("fallback-conservative", "switch-cooldown"))


@pytest.mark.slow
def test_a_machine_ignoring_the_cooldown_is_caught_by_both(example):
    params = MachineParams.from_spec(example)
    proofs = {p.property: p for p in prove_machine(params, step_function=hasty_step, encoding=HastyEncoding)}
    explicit = {p.property: p for p in check_explicit(params, alphabet(params, free_rows(params)), hasty_step)}
    _assert_replayed_violation(params, proofs["switch-cooldown"], hasty_step)
    _assert_replayed_violation(params, explicit["switch-cooldown"], hasty_step)
    assert proofs["invariant-inductive"].verdict == "violated"  # a reachable state leaves the invariant
    assert disagreements(proofs.values(), explicit.values(), contradictions_only=True) == []
    assert proofs["invariant-initial"].verdict == "proved"
    assert all(proofs[name].verdict == "unknown" for name in MACHINE_PROPERTIES if name != "switch-cooldown")


@pytest.mark.slow
def test_a_table_proposing_an_illegal_token_breaks_output_legal_for_both(example):
    params = MachineParams.from_spec(example)
    good = synthetic_table(example)
    proposal = good.proposal.copy()
    proposal[123] = example.output_index("SPARSE_2_4")
    bad = replace(good, proposal=proposal)
    proofs = {p.property: p for p in prove_machine(params, bad)}
    explicit = {p.property: p for p in check_explicit(params, alphabet(params, table_rows(bad)))}
    _assert_replayed_violation(params, proofs["output-legal"], step)
    _assert_replayed_violation(params, explicit["output-legal"], step)
    assert proofs["output-legal"].trace.steps[-1].output == example.output_index("SPARSE_2_4")
    assert disagreements(proofs.values(), explicit.values(), contradictions_only=True) == []
    assert "output-legal: z3 says violated" not in "\n".join(disagreements(proofs.values(), explicit.values()))


class WeakInvariant(StepEncoding):
    """The invariant "cooldown > 0 or since >= C" alone, which is not inductive."""

    def invariant_holds(self, state, since):
        p = self.params
        in_domain = is_well_formed(p, state) and state.current in p.legal and 0 <= since <= p.cooldown_cycles
        return in_domain and (state.cooldown > 0 or since >= p.cooldown_cycles)

    def declarations(self):
        C = self.params.cooldown_cycles
        return [
            (
                f"(define-fun inv ((cur Int) (cand Int) (cnt Int) (cd Int) (since Int)) Bool (and "
                f"(domain cur cand cnt cd) (legal cur) (<= 0 since) (<= since {C}) (or (> cd 0) (>= since {C}))))"
                if line.startswith("(define-fun inv ")
                else line
            )
            for line in super().declarations()
        ]


@pytest.mark.slow
def test_an_unreachable_induction_counterexample_is_unknown_never_violated_nor_proved(example):
    params = MachineParams.from_spec(example)
    proofs = {p.property: p for p in prove_machine(params, encoding=WeakInvariant)}
    assert proofs["invariant-initial"].verdict == "proved"
    assert proofs["invariant-inductive"].verdict == "unknown"
    assert "is not reachable: the invariant is too weak" in proofs["invariant-inductive"].reason
    assert proofs["switch-cooldown"].verdict == "unknown"
    assert {p.verdict for p in proofs.values()} <= {"proved", "unknown"}
    assert all(p.verdict == "unknown" for name, p in proofs.items() if name in MACHINE_PROPERTIES)
    assert proofs["output-legal"].reason == "the query is unsat but the invariant is not proved inductive"


# ---------------------------------------------------------------- the table


def test_z3_proves_the_table_property_of_a_sound_table(example, tmp_path):
    table = synthetic_table(example)
    proofs = prove_table(table, example, tmp_path)
    assert verdicts(proofs) == {name: "proved" for name in TABLE_PROPERTIES}
    for proof in proofs:
        text = (tmp_path / proof.smt2).read_text()
        assert read_header(text)["verdict"] == "proved" and read_status(text) == "unsat"
        assert "; seconds:" not in text  # the artifact records this file's hash: no run facts
        solver = z3.Solver()
        solver.from_file(str(tmp_path / proof.smt2))
        assert solver.check() == z3.unsat


@pytest.mark.parametrize(
    "fault, prop, kind",
    [
        ("forbidden", "table-tokens", "forbidden"),
        ("illegal", "table-tokens", "illegal"),
        ("illegal", "table-codes", "code"),
        ("mask", "table-masks", "mask"),
    ],
)
def test_z3_finds_the_faulty_cell_of_a_tampered_table(example, fault, prop, kind):
    table = synthetic_table(example)
    grid = table.grid
    cell = grid.cell_of([10, 10, 10, 90, 10])
    proposal, allowed = table.proposal.copy(), table.allowed.copy()
    if fault == "forbidden":
        proposal[cell] = example.output_index("INT4")
    elif fault == "illegal":
        proposal[cell] = example.output_index("SPARSE_2_4")
    else:
        allowed[cell, example.output_index("INT4")] = True
    bad = replace(table, proposal=proposal, allowed=allowed)
    proofs = {p.property: p for p in prove_table(bad, example)}
    assert proofs[prop].verdict == "violated" and proofs[prop].cell == cell
    assert any(v.cell == cell and v.kind == kind for v in check_table(bad, example))
    assert proofs[prop].reason.startswith(f"cell {cell} (compute_util in [0, 20)")


SMALL = {
    "certfsm_spec": 1,
    "name": "small",
    "model": "none.onnx",
    "inputs": [
        {"name": "a", "unit": "", "min": 0, "max": 4, "bins": 4},
        {"name": "b", "unit": "", "min": 0, "max": 3, "edges": [0, 1, 2.5, 3]},
    ],
    "outputs": ["SAFE", "X", "Y", "Z"],
    "tokens": {"SAFE": 0, "X": 1, "Y": 2, "Z": 3},
    "legal_tokens": ["SAFE", "X", "Y"],
    "decision": "argmax",
    "conservative_token": "SAFE",
}


@st.composite
def small_tables(draw):
    data = copy.deepcopy(SMALL)
    rules = []
    for j in range(draw(st.integers(0, 3))):
        when = {}
        for name, top in (("a", 4), ("b", 3)):
            if draw(st.booleans()):
                low = draw(st.sampled_from([0, 0.5, 1, 2, 2.5, 3, top]))
                high = draw(st.sampled_from([v for v in (0, 1, 2.5, 3, 3.5, 4) if low <= v <= top] or [top]))
                when[name] = {"min": min(low, top), "max": high}
        rules.append(
            {
                "name": f"r{j}",
                "when": when,
                "forbid": draw(st.lists(st.sampled_from(["X", "Y", "Z"]), min_size=1, unique=True)),
            }
        )
    data["legality_rules"] = rules
    spec = spec_from_dict(data, "small.json", require_model=False)
    grid = Grid.from_spec(spec)
    masks = allowed_masks(spec, grid)
    proposal = np.array(draw(st.lists(st.integers(0, 3), min_size=grid.n_cells, max_size=grid.n_cells)))
    if draw(st.booleans()):
        proposal[~masks[np.arange(grid.n_cells), proposal]] = 0
    flips = draw(st.lists(st.tuples(st.integers(0, grid.n_cells - 1), st.integers(0, 3)), max_size=2))
    for c, k in flips:
        masks[c, k] = not masks[c, k]
    return spec, Table(grid, proposal, np.ones(grid.n_cells, dtype=np.int8), masks)


@settings(max_examples=examples(20), deadline=None)
@given(small_tables())
def test_z3_and_the_numpy_check_agree_on_random_small_tables(sample):
    spec, table = sample
    kinds = {v.kind for v in check_table(table, spec)}
    proofs = {p.property: p for p in prove_table(table, spec)}
    assert (proofs["table-tokens"].verdict == "violated") == bool(kinds & {"illegal", "forbidden"})
    assert (proofs["table-masks"].verdict == "violated") == ("mask" in kinds)
    assert (proofs["table-codes"].verdict == "violated") == ("code" in kinds)
    assert all(p.verdict in ("proved", "violated") for p in proofs.values())


@pytest.mark.slow
def test_a_random_table_over_the_whole_example_grid_is_proved_in_seconds(example):
    table = synthetic_table(example)
    masks = table.allowed
    proposal = np.random.default_rng(0).integers(0, 4, table.n_cells)
    proposal[~masks[np.arange(table.n_cells), proposal]] = example.conservative_index
    proofs = prove_table(replace(table, proposal=proposal), example, timeout=60)
    assert verdicts(proofs) == {name: "proved" for name in TABLE_PROPERTIES}
    assert sum(p.seconds for p in proofs) < 30


def test_every_machine_property_the_certificate_names_has_one_description_in_its_proof_files():
    """The names live in the core (the artifact loader checks them); each proof file describes its property."""
    assert tuple(PROPERTY_DESCRIPTIONS) == MACHINE_PROPERTIES
