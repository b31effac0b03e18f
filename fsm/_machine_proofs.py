"""Z3 proofs of the machine properties over all states and all inputs, by induction over one step.

The encoded state is the machine's registers (cur, cand, cnt, cd) plus
the history variable ``since`` (cycles since the last switch to a
non-conservative token, saturating at C = cooldown_cycles; see
`_explicit`). The inductive invariant, stated once here in SMT-LIB
(`_INVARIANT`) and once in Python (`invariant_holds`):

- the registers are in their domain: 0 <= cur < n, cur legal,
  cand = -1 and cnt = 0 or (0 <= cand < n and 1 <= cnt <= confirm_cycles),
  0 <= cd <= C, 0 <= since <= C;
- cd = 0 implies since = C, and cd > 0 implies since + cd >= C + 1.

The second line is what the cooldown property needs: a switch needs the
counted-down cooldown to be 0, i.e. cd <= 1, which the invariant turns
into since >= C. The weaker "cd > 0 or since >= C" is not inductive
(from cd = 1 and since = 0 one step reaches cd = 0, since = 1).

Queries, each one SMT-LIB 2.6 script solved by Z3 from its own text
(so the file and the proof cannot drift apart), ``unsat`` meaning holds:

- ``invariant-initial``: the initial state (with since = C) satisfies it;
- ``invariant-inductive``: invariant + any admissible input => invariant
  after the step;
- one query per property: invariant + any admissible input + the step
  => the property on that transition.

A property is ``proved`` only when its own query and both invariant
queries are unsat. Admissible inputs: either *free* -- any proposal and
allowed row satisfying the invariants the table proofs establish (the
proposal is legal and allowed in its row, the conservative token is
allowed, illegal tokens are not) -- or, given a table, exactly its
(proposal, row) classes. In both, in_envelope, sla_ok and the override
(present or not, any integer) are free.

A ``sat`` answer is a state + input. It counts as ``violated`` only
after a replay through the step function from the initial state: by a
path to Z3's state found by explicit search, or else by a reachable
violation of the same property found by enumeration. Otherwise the
counterexample state is unreachable, the invariant too weak, and the
verdict ``unknown``.
"""

from __future__ import annotations

import time
from pathlib import Path

from certfsm import INVARIANT_QUERIES, MACHINE_PROPERTIES
from certfsm.verify import smtlib_text, solve_text, write_proof_query

from ._explicit import (
    PROPERTY_DESCRIPTIONS,
    alphabet,
    explore,
    free_rows,
    initial_node,
    next_since,
    table_rows,
    transition_violations,
    violation_trace,
)
from ._machine import MachineInput, MachineParams, Proof, Reason, State, replay, step

_INVARIANT_TEXT = (
    "registers in their domain, current token legal, since_switch in 0..C, "
    "cooldown = 0 implies since_switch = C, cooldown > 0 implies since_switch + cooldown >= C + 1"
)
_QUERY_DESCRIPTIONS = {
    "invariant-initial": "the initial state satisfies the inductive invariant: " + _INVARIANT_TEXT,
    "invariant-inductive": "one step from any state satisfying the invariant, on any admissible input, "
    "satisfies it again",
    **PROPERTY_DESCRIPTIONS,
}


def invariant_holds(params: MachineParams, state: State, since: int) -> bool:
    """The inductive invariant in Python (the same statement as the SMT-LIB `inv`)."""
    limit = params.cooldown_cycles
    n = params.n_tokens
    no_candidate = state.candidate == -1 and state.count == 0
    candidate = 0 <= state.candidate < n and 1 <= state.count <= params.confirm_cycles
    timing = since == limit if state.cooldown == 0 else since + state.cooldown >= limit + 1
    return (
        0 <= state.current < n
        and state.current in params.legal
        and (no_candidate or candidate)
        and 0 <= state.cooldown <= limit
        and 0 <= since <= limit
        and timing
    )


# ------------------------------------------------------------- SMT-LIB files and solving


def solve_script(body: list[str], logic: str, timeout: float, rlimit: int | None = None):
    """Solve the script with Z3: (answer, model values by name or None, reason). Answer: sat, unsat or unknown."""
    return solve_text(smtlib_text(body, logic), timeout, rlimit)


def write_proof_file(
    path,
    body: list[str],
    logic: str,
    *,
    prop: str,
    description: str,
    verdict: str,
    stable: bool = False,
    extra: dict | None = None,
) -> str:
    """Header + standalone script at `path`, atomically; returns the file's SHA-256 (hex).

    The header holds no time: the artifact's certificate records this
    file's hash, and the same spec and model must give the same artifact
    (the time is in the report's summary.json). `stable` also leaves out
    the certfsm version (golden files).
    """
    return write_proof_query(
        path,
        body,
        logic,
        prop_name=prop,
        description=description,
        verdict=verdict,
        seconds=None,
        stable=stable,
        extra=extra,
    )


# ------------------------------------------------------------- the encoding


def _any(terms: list[str]) -> str:
    if not terms:
        return "false"
    return terms[0] if len(terms) == 1 else f"(or {' '.join(terms)})"


def _is(term: str, values) -> str:
    return _any([f"(= {term} {v})" for v in values])


_STATE = ("cur", "cand", "cnt", "cd", "since")
_NEXT = ("n_cur", "n_cand", "n_cnt", "n_cd", "n_since")


class StepEncoding:
    """`step` as SMT-LIB define-funs over the state constants and the input constants.

    The step reads the cell's allowed row only through `seen_allowed`,
    which is the true row here. A variant machine (tests plant one
    without legality pre-emption) overrides that hook; the properties are
    always stated against the true row ``allowed``.
    """

    def __init__(self, params: MachineParams) -> None:
        self.params = params

    def seen_allowed(self, token: str) -> str:
        return f"(allowed {token})"

    def invariant_holds(self, state: State, since: int) -> bool:
        """The Python statement of this encoding's ``inv``, used to confirm invariant counterexamples."""
        return invariant_holds(self.params, state, since)

    def declarations(self) -> list[str]:
        p = self.params
        n, C, K = p.n_tokens, p.cooldown_cycles, p.conservative
        lines = [
            f"; machine: {p.describe()}",
            "; state before the step; since = cycles since the last switch to a non-conservative token "
            f"(saturating at {C})",
        ]
        lines += [f"(declare-const {name} Int)" for name in _STATE]
        lines.append("; inputs of the cycle: proposal and allowed row of the cell, envelope, SLA, override")
        lines.append("(declare-const prop Int)")
        lines += [f"(declare-const a_{k} Bool)" for k in range(n)]
        lines += [
            "(declare-const env Bool)",
            "(declare-const sla Bool)",
            "(declare-const ovr_on Bool)",
            "(declare-const ovr Int)",
        ]
        lines.append(f"(define-fun allowed ((t Int)) Bool {_any([f'(and (= t {k}) a_{k})' for k in range(n)])})")
        lines.append(f"(define-fun legal ((t Int)) Bool {_is('t', sorted(p.legal))})")
        lines.append(f"(define-fun overridable ((t Int)) Bool {_is('t', sorted(p.overridable))})")
        code = "(- 1)"
        for k in range(n - 1, -1, -1):
            code = f"(ite (= t {k}) {p.codes[k]} {code})"
        lines.append(f"(define-fun code ((t Int)) Int {code})")
        lines.append("; the state domain and the inductive invariant")
        lines.append(
            f"(define-fun domain ((cur Int) (cand Int) (cnt Int) (cd Int)) Bool (and (<= 0 cur) (< cur {n}) "
            f"(or (and (= cand (- 1)) (= cnt 0)) (and (<= 0 cand) (< cand {n}) (<= 1 cnt) "
            f"(<= cnt {p.confirm_cycles}))) (<= 0 cd) (<= cd {C})))"
        )
        lines.append(
            f"(define-fun inv ((cur Int) (cand Int) (cnt Int) (cd Int) (since Int)) Bool (and "
            f"(domain cur cand cnt cd) (legal cur) (<= 0 since) (<= since {C}) "
            f"(ite (= cd 0) (= since {C}) (>= (+ since cd) {C + 1}))))"
        )
        lines.append(f"(define-fun initial () Bool (inv {K} (- 1) 0 0 {C}))")
        return lines

    def step_definitions(self) -> list[str]:
        p = self.params
        C, K, confirm = p.cooldown_cycles, p.conservative, p.confirm_cycles
        R = Reason
        down = _is("act", [R.FALLBACK_ENVELOPE, R.FALLBACK_SLA, R.LEGALITY_PREEMPT, R.MOVE_DOWN])
        hold = _is("act", [R.HOLD_CONFIRMING, R.HOLD_COOLDOWN])
        restart = f"(or {down} (= act {R.SWITCH}) (and (= act {R.OVERRIDE}) (not (= ovr cur))))"
        return [
            "; the step (fsm/_machine.py: step), rule by rule; reason codes: "
            + ", ".join(f"{int(r)} {r.name}" for r in Reason),
            f"(define-fun seen ((t Int)) Bool {self.seen_allowed('t')})",
            "(define-fun cdm () Int (ite (> cd 0) (- cd 1) 0))",
            f"(define-fun cnt_new () Int (ite (= cand prop) (ite (< cnt {confirm}) (+ cnt 1) {confirm}) 1))",
            "(define-fun ovr_ok () Bool (and ovr_on (overridable ovr) (seen ovr)))",
            "(define-fun table_path () Bool (and env sla (seen cur) (not ovr_ok)))",
            f"(define-fun act () Int (ite (not env) {R.FALLBACK_ENVELOPE} (ite (not sla) {R.FALLBACK_SLA} "
            f"(ite (not (seen cur)) {R.LEGALITY_PREEMPT} "
            f"(ite ovr_ok (ite (or (= ovr cur) (= ovr {K}) (= cdm 0)) {R.OVERRIDE} {R.OVERRIDE_WAITING}) "
            f"(ite (= prop cur) {R.KEEP_CURRENT} (ite (= prop {K}) {R.MOVE_DOWN} "
            f"(ite (and (>= cnt_new {confirm}) (= cdm 0)) {R.SWITCH} "
            f"(ite (< cnt_new {confirm}) {R.HOLD_CONFIRMING} {R.HOLD_COOLDOWN})))))))))",
            f"(define-fun reason () Int (ite (and table_path ovr_on (not (overridable ovr))) "
            f"{R.OVERRIDE_REFUSED_NOT_OVERRIDABLE} (ite (and table_path ovr_on) {R.OVERRIDE_REFUSED_FORBIDDEN} act)))",
            f"(define-fun n_cur () Int (ite {down} {K} "
            f"(ite (= act {R.OVERRIDE}) ovr (ite (= act {R.SWITCH}) prop cur))))",
            f"(define-fun n_cand () Int (ite {hold} prop (- 1)))",
            f"(define-fun n_cnt () Int (ite {hold} cnt_new 0))",
            f"(define-fun n_cd () Int (ite {restart} {C} cdm))",
            "(define-fun out () Int n_cur)",
            f"(define-fun switched () Bool (and (not (= out cur)) (not (= out {K}))))",
            f"(define-fun n_since () Int (ite switched {min(1, C)} (ite (< since {C}) (+ since 1) {C})))",
        ]

    def input_assumption(self, rows) -> list[str]:
        p = self.params
        if rows is None:
            illegal = [f"(not a_{k})" for k in range(p.n_tokens) if k not in p.legal]
            return [
                "; admissible inputs (free): a legal proposal allowed in its row, the conservative token "
                "allowed, illegal tokens not allowed",
                f"(assert (and (legal prop) (allowed prop) (allowed {p.conservative}) {' '.join(illegal)}))",
            ]
        classes = []
        for proposal, row in rows:
            bits = " ".join(f"a_{k}" if a else f"(not a_{k})" for k, a in enumerate(row))
            classes.append(f"(and (= prop {proposal}) {bits})")
        return [
            f"; admissible inputs: the table's {len(classes)} (proposal, allowed row) classes",
            f"(assert {_any(classes)})",
        ]

    def property_assertions(self, name: str) -> list[str]:
        p = self.params
        K, C = p.conservative, p.cooldown_cycles
        if name == "invariant-initial":
            return ["(assert (not initial))"]
        lines = ["(assert (inv cur cand cnt cd since))"]
        if name == "invariant-inductive":
            return lines + ["(assert (not (inv n_cur n_cand n_cnt n_cd n_since)))"]
        claims = {
            "output-legal": f"(and (legal out) {_is('(code out)', sorted(p.legal_codes))})",
            "output-allowed": "(=> env (allowed out))",
            "fallback-conservative": f"(=> (or (not env) (not sla)) (= out {K}))",
            "switch-cooldown": f"(=> switched (>= since {C}))",
            "override-allowed": (
                f"(and (=> (and ovr_on env) (allowed out)) (=> (= reason {Reason.OVERRIDE}) "
                "(and ovr_on (= out ovr) (overridable ovr))))"
            ),
        }
        if name in claims:
            return lines + [f"(assert (not {claims[name]}))"]
        if name == "total-deterministic":
            copies = []
            for copy in ("x", "y"):
                copies += [f"(declare-const {copy}_{v} Int)" for v in (*_STATE, "out", "reason")]
                copies += [f"(assert (= {copy}_{v} {n}))" for v, n in zip(_STATE, _NEXT)]
                copies += [f"(assert (= {copy}_out out))", f"(assert (= {copy}_reason reason))"]
            same = " ".join(f"(= x_{v} y_{v})" for v in (*_STATE, "out", "reason"))
            reasons = _is("x_reason", [int(r) for r in Reason])
            return (
                lines
                + [
                    "; two results of the same step must be equal, in the domain, emit the new "
                    "current token and carry a known reason"
                ]
                + copies
                + [f"(assert (not (and {same} (domain x_cur x_cand x_cnt x_cd) (= x_out x_cur) {reasons})))"]
            )
        raise ValueError(f"name={name!r} is not one of {INVARIANT_QUERIES + MACHINE_PROPERTIES}")

    def body(self, name: str, rows) -> list[str]:
        return (
            self.declarations()
            + self.input_assumption(rows)
            + self.step_definitions()
            + [f"; the query, negated: {_QUERY_DESCRIPTIONS[name]}"]
            + self.property_assertions(name)
        )


# ------------------------------------------------------------- proving


def prove_machine(
    params: MachineParams,
    table=None,
    folder=None,
    *,
    timeout: float = 60.0,
    stable: bool = False,
    step_function=step,
    encoding=StepEncoding,
    rlimit: int | None = None,
    refinement=None,
) -> tuple[Proof, ...]:
    """Every query of INVARIANT_QUERIES + MACHINE_PROPERTIES by Z3, one `Proof` each.

    `table=None` proves the machine for free admissible inputs (any table
    that passes `prove_table`); a table restricts inputs to its classes.
    With `folder` (an existing folder) each query is written to
    ``machine-<name>.smt2``. `step_function` and `encoding` name the
    machine under proof (the production `step` and its `StepEncoding`
    unless a test plants a variant); counterexamples are replayed
    through `step_function`. `rlimit` as in `prove_table`. `refinement`
    (a `certfsm.Refinement` of `table`) adds its leaves' classes to the
    admissible inputs (`table_rows`), so the proofs cover every leaf.
    """
    rows = None if table is None else table_rows(table, refinement)
    encoder = encoding(params)
    witnesses = _Witnesses(encoder, rows, step_function)
    raw = {}
    for name in INVARIANT_QUERIES + MACHINE_PROPERTIES:
        body = encoder.body(name, rows)
        started = time.perf_counter()
        answer, model, reason = solve_script(body, "QF_LIA", timeout, rlimit)
        seconds = time.perf_counter() - started
        raw[name] = (body, answer, model, reason, seconds)
    invariant_ok = all(raw[name][1] == "unsat" for name in INVARIANT_QUERIES)
    proofs = []
    for name, (body, answer, model, reason, seconds) in raw.items():
        trace = None
        if answer == "unsat":
            if name in INVARIANT_QUERIES or invariant_ok:
                verdict = "proved"
            else:
                verdict, reason = "unknown", "the query is unsat but the invariant is not proved inductive"
        elif answer == "sat":
            trace, reason = witnesses.confirm(name, model)
            verdict = "violated" if trace is not None else "unknown"
        else:
            verdict = "unknown"
        file_name = sha = None
        if folder is not None:
            file_name = f"machine-{name}.smt2"
            inputs = "free (any table that passes prove_table)" if rows is None else f"{len(rows)} table classes"
            if refinement is not None:
                inputs += f" (cells and {refinement.n_leaves} leaves)"
            sha = write_proof_file(
                Path(folder) / file_name,
                body,
                "QF_LIA",
                prop=name,
                description=_QUERY_DESCRIPTIONS[name],
                verdict=verdict,
                stable=stable,
                extra={"machine": params.describe(), "inputs": inputs, "invariant": _INVARIANT_TEXT},
            )
        proofs.append(
            Proof(
                verdict,
                "z3",
                seconds,
                reason if verdict != "proved" else "",
                trace=trace,
                property=name,
                smt2=file_name,
                smt2_sha256=sha,
            )
        )
    return tuple(proofs)


class _Witnesses:
    """Turns a Z3 model (state + input) into a replayed trace from the initial state, or explains why not."""

    def __init__(self, encoder: StepEncoding, rows, step_function) -> None:
        self.params, self.holds = encoder.params, encoder.invariant_holds
        self.rows, self.step_function = rows, step_function
        self._exploration = None

    def exploration(self):
        """The reachable graph over the same admissible inputs, or None when they are too many to enumerate."""
        if self._exploration is None:
            try:
                rows = free_rows(self.params) if self.rows is None else self.rows
            except ValueError:
                return None
            self._exploration = explore(self.params, alphabet(self.params, rows), self.step_function)
        return self._exploration

    def confirm(self, name: str, model):
        p = self.params
        state = State(model.int("cur"), model.int("cand"), model.int("cnt"), model.int("cd"))
        since = model.int("since")
        item = MachineInput(
            model.int("prop"),
            tuple(model.bool(f"a_{k}") for k in range(p.n_tokens)),
            model.bool("env"),
            model.bool("sla"),
            model.int("ovr") if model.bool("ovr_on") else None,
        )
        where = f"z3's counterexample: {state} with since_switch={since}, input {item.describe()}"
        if name == "invariant-initial":
            if not self.holds(*initial_node(p)):
                return replay(p, [], self.step_function), f"the initial state breaks the invariant ({where})"
            return None, f"{where}; not confirmed: the initial state satisfies the invariant in Python"
        exploration = self.exploration()
        if exploration is None:
            return None, f"{where}; too many admissible inputs to search for a reachable witness"
        path = exploration.path_to((state, since))
        if path is not None:
            trace = self._replay([*path, item])
            if trace is not None and self._breaks(name, trace):
                return trace, f"{where}, reached in {len(path)} cycles"
        if name in MACHINE_PROPERTIES:
            trace = violation_trace(exploration, name, self.step_function)
        else:
            outside = next((node for node in exploration.parent if not self.holds(*node)), None)
            trace = None if outside is None else self._replay(exploration.path_to(outside))
        if trace is not None and self._breaks(name, trace):
            return trace, f"{where} is not reachable; enumeration found a reachable violation"
        reached = "reachable but not confirmed by replay" if path is not None else "not reachable"
        return None, f"{where} is {reached}: the invariant is too weak to decide this query"

    def _replay(self, inputs):
        """The replayed trace, or None when the step function raises on the way (never a confirmation)."""
        try:
            return replay(self.params, inputs, self.step_function)
        except Exception:
            return None

    def _breaks(self, name: str, trace) -> bool:
        p = self.params
        if not trace.steps:
            return False
        since = since_before_last(p, trace)
        last = trace.steps[-1]
        if name == "invariant-inductive":
            return not self.holds(last.after, next_since(p, (last.before, since), last.output))
        outcome = (last.after, last.output, last.reason)
        item = last.inputs
        again = self.step_function(
            p, last.before, item.proposal, item.allowed, item.in_envelope, item.sla_ok, item.override
        )
        return name in transition_violations(p, (last.before, since), item, outcome, again)


def since_before_last(params: MachineParams, trace) -> int:
    node = initial_node(params)
    for s in trace.steps[:-1]:
        node = (s.after, next_since(params, node, s.output))
    return node[1]


def disagreements(z3_proofs, explicit_proofs, *, contradictions_only: bool = False) -> list[str]:
    """Properties on which Z3 and enumeration give different verdicts, one line each.

    Certification needs this list empty (both engines proved every
    property). With `contradictions_only`, only proved-against-violated
    is reported: that means a bug in an engine or in the encoding, while
    unknown against a decided verdict only means one engine could not
    decide (for instance Z3 when the invariant is broken).
    """
    explicit = {p.property: p.verdict for p in explicit_proofs}
    lines = []
    for proof in z3_proofs:
        other = explicit.get(proof.property)
        if other is None or other == proof.verdict:
            continue
        if contradictions_only and "unknown" in (other, proof.verdict):
            continue
        lines.append(f"{proof.property}: z3 says {proof.verdict}, enumeration says {other}")
    return lines
