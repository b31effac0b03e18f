"""The four equivalence claims as SMT-LIB queries over one rising edge, and their counterexamples read back.

Each query is yosys's transition relation of the module (`_transition.py`),
two states ``s`` (before the edge) and ``t`` (after it) related by it, a
named view ``s.NAME`` / ``t.NAME`` of every signal the port contract
names (a bit vector, one bit wide for a flag), and the negated claim:
``unsat`` means the claim holds. The artifact's side is written from the
machine (`certfsm.machine.Machine`) and, for the state machine, from
`certfsm.fsm.StepEncoding`, the encoding the machine proofs use.
"""

from __future__ import annotations

from certfsm.fsm import StepEncoding
from certfsm.machine import NO_CANDIDATE, OUT_OF_ENVELOPE, Machine, Reason, State, step

from ._hardware import STATE_REGISTERS, Hardware
from ._netlist import Rom
from ._leaves import walk
from ._transition import STATE, Transition

QUERIES = ("reset", "hold", "sample", "step")
PIPELINE_REGISTERS = (
    "valid_q",
    "in_envelope_q",
    "cell_q",
    "sla_ok_q",
    "override_request_q",
    "override_code_q",
    "proposal_q",
    "allowed_q",
)
OUTPUTS = ("token_code", "reason_code", "cell_index", "out_valid")
INPUTS = ("rst", "in_valid", "sla_ok", "override_request", "override_code")
DESCRIPTIONS = {
    "reset": "an edge with rst gives the initial state, empties the pipeline and sets the reset outputs",
    "hold": "an edge with valid_q 0 keeps the state and the outputs and clears out_valid",
    "sample": "binning, ROM and masks: for every input the pipeline registers hold the artifact's envelope test, "
    "cell (integer thresholds of its edges), table word and allowed mask (in a refined cell those of the leaf "
    "its box tree gives), and pass in_valid, sla_ok and the override through",
    "step": "for every state in the machine's domain and every pipeline content, the next state and outputs are "
    "those of the machine's step encoding (certfsm.fsm.StepEncoding)",
}
LOGIC = {"reset": "QF_UFBV", "hold": "QF_UFBV", "sample": "QF_UFBV", "step": "ALL"}
"""The step claim links bit vectors to StepEncoding's integers (bv2nat), so it needs more than QF_UFBV."""


def _all(terms) -> str:
    terms = list(terms)
    if not terms:
        return "true"
    return terms[0] if len(terms) == 1 else f"(and {' '.join(terms)})"


class Claims:
    """Builds the queries for one module against one machine and explains a model of a negated claim."""

    def __init__(self, machine: Machine, reference: Hardware, transition: Transition, file_name: str) -> None:
        self.machine, self.reference, self.transition, self.file_name = machine, reference, transition, file_name
        self.params = machine.params
        self.buses = [(bank.bus.name, bank.signed) for bank in reference.banks]
        self.signed = dict(self.buses)
        classes: dict[tuple[int, int], int] = {}
        refinement = machine.refinement
        refined = set() if refinement is None else set(refinement.cells)
        for cell, (proposal, mask) in enumerate(zip(machine.proposal, machine.allowed)):
            if cell not in refined:
                classes.setdefault((proposal, mask), cell)
        for cell, tree in zip(*((refinement.cells, refinement.trees) if refinement is not None else ((), ()))):
            for leaf in tree.leaves:
                classes.setdefault((leaf.token, leaf.allowed), cell)
        self.classes = classes
        """(proposal, mask) -> a cell with it (a refined cell for a leaf's): what the pipeline can hold."""
        self.cut_wires = frozenset(node.address.name for node in reference.module.body if isinstance(node, Rom))
        """The ROM address wires, which the ROMs' multiplexer trees read at every node: `Transition.body` cuts
        them."""

    # ---------------------------------------------------------------- terms

    def width(self, name: str) -> int:
        return self.transition.signals[name]

    def literal(self, name: str, value: int) -> str:
        """`value` as a bit-vector literal of signal `name`'s width (two's complement for a negative value)."""
        width = self.width(name)
        return f"(_ bv{value % (1 << width)} {width})"

    def equals(self, view: str, value: int) -> str:
        return f"(= {view} {self.literal(view.split('.', 1)[1], value)})"

    @staticmethod
    def integer(view: str) -> str:
        """The view read as an unsigned integer, for the links to StepEncoding."""
        return f"(bv2nat {view})"

    @staticmethod
    def bit(view: str, k: int = 0) -> str:
        """Bit k of the view is 1."""
        return f"(= ((_ extract {k} {k}) {view}) #b1)"

    # ---------------------------------------------------------------- the common part

    def prefix(self) -> list[str]:
        """The lines every claim begins with: the transition relation, one edge from s to t, and the views."""
        t, m = self.transition, self.transition.module
        body, cuts = t.body(self.cut_wires)
        lines = [
            f"; the module's transition relation: {t.yosys_version} write_smt2 -stbv -wires of {self.file_name}, "
            f"module {m}",
            *body,
            "; one rising edge: state s before it, state t after it",
            f"(declare-const s |{m}_s|)",
            f"(declare-const t |{m}_s|)",
            *(
                ["; the cut points' definitions in state s, the state every wire of the relation is read in"]
                if cuts
                else []
            ),
            *(f"(assert (= ({function} s) {STATE.sub('s', expression)}))" for function, expression in cuts),
            f"(assert (|{m}_h| s))",
            f"(assert (|{m}_h| t))",
            f"(assert (|{m}_t| s t))",
            "; views of the port contract's signals: s.NAME before the edge, t.NAME after it",
        ]
        for (state, name), declaration in zip(self._views(), self.view_declarations()):
            width, term = self.width(name), t.at(name, state)
            value = f"(ite {term} #b1 #b0)" if width == 1 else term
            lines += [declaration, f"(assert (= {state}.{name} {value}))"]
        return lines

    def view_declarations(self) -> list[str]:
        """The views' declarations, the only names of the prefix a claim uses (`verify.SharedPrefix` restates them)."""
        return [f"(declare-const {state}.{name} (_ BitVec {self.width(name)}))" for state, name in self._views()]

    def _views(self) -> list[tuple[str, str]]:
        names = [*INPUTS, *(name for name, _ in self.buses), *STATE_REGISTERS, *PIPELINE_REGISTERS, *OUTPUTS]
        return [(state, name) for state in ("s", "t") for name in names]

    def claim(self, name: str) -> list[str]:
        """The lines after the prefix: the claim `name`'s definitions, then its negation asserted."""
        claim = getattr(self, f"_{name}")()
        return [*claim[:-1], f"; the claim, negated: {DESCRIPTIONS[name]}", claim[-1]]

    def body(self, name: str) -> list[str]:
        """The whole query `name` as its file states it: the prefix, then the claim."""
        return [*self.prefix(), *self.claim(name)]

    # ---------------------------------------------------------------- reset and hold

    def _reset(self) -> list[str]:
        p = self.params
        expected = {
            **self.reference.register_values(self.machine.initial_state()),
            "valid_q": 0,
            "out_valid": 0,
            "token_code": p.codes[p.conservative],
            "reason_code": 0,
            "cell_index": self.reference.no_cell,
        }
        claim = _all(self.equals(f"t.{k}", v) for k, v in expected.items())
        return [f"(assert {self.bit('s.rst')})", f"(assert (not {claim}))"]

    def _hold(self) -> list[str]:
        kept = [*STATE_REGISTERS, "token_code", "reason_code", "cell_index"]
        return [
            f"(assert (not {self.bit('s.rst')}))",
            f"(assert (not {self.bit('s.valid_q')}))",
            f"(assert (not {_all([*(f'(= t.{k} s.{k})' for k in kept), self.equals('t.out_valid', 0)])}))",
        ]

    # ---------------------------------------------------------------- sample: binning, ROM and masks

    def _sample(self) -> list[str]:
        m, cw = self.machine, self.width("cell_q")
        lines = [
            "; the artifact's binning (certfsm docs/semantics.md, 'Fixed point'): per input the integer thresholds",
            "; ceil(edge * 2^frac_bits) and the envelope of the artifact's edges; a bin is the number of",
            "; thresholds at or below the value, the cell the bins in C order (the last input varies fastest)",
        ]
        envelopes, terms = [], []
        for (bus, signed), (interior, low, high), name, edges, bits, stride in zip(
            self.buses, m.fixed_point, m.names, m.edges, m.frac_bits, m.strides
        ):
            at_least, at_most = ("bvsge", "bvsle") if signed else ("bvuge", "bvule")
            view = f"s.{bus}"
            lines.append(
                f"; {name}: edges {list(edges)}, frac_bits {bits}: envelope {low} .. {high}, "
                f"thresholds {list(interior)}"
            )
            lines.append(
                f"(define-fun envelope.{bus} () Bool (and ({at_least} {view} {self.literal(bus, low)}) "
                f"({at_most} {view} {self.literal(bus, high)})))"
            )
            counts = [f"(ite ({at_least} {view} {self.literal(bus, t)}) (_ bv1 {cw}) (_ bv0 {cw}))" for t in interior]
            total = f"(_ bv0 {cw})" if not counts else counts[0] if len(counts) == 1 else f"(bvadd {' '.join(counts)})"
            lines.append(f"(define-fun bin.{bus} () (_ BitVec {cw}) {total})")
            terms.append(f"bin.{bus}" if stride == 1 else f"(bvmul bin.{bus} (_ bv{stride} {cw}))")
            envelopes.append(f"envelope.{bus}")
        lines.append(f"(define-fun envelope () Bool {_all(envelopes)})")
        cell = terms[0] if len(terms) == 1 else f"(bvadd {' '.join(terms)})"
        lines.append(f"(define-fun cell () (_ BitVec {cw}) {cell})")
        lines.append("; the artifact's table and allowed masks: the word of cell c, decoded from the bits of c")
        for cell in range(m.n_cells):
            status = "exact" if m.exact[cell] else "conservative"
            lines.append(
                f"; cell {cell}: {m.describe_cell(cell)}: {status} {m.tokens[m.proposal[cell]]}, "
                f"allowed mask {m.allowed[cell]:0{self.params.n_tokens}b}"
            )
        tokens, allowed, address, bits = list(m.proposal), list(m.allowed), "cell", cw
        if m.refinement is not None:
            lines += self._entry()
            leaves = [leaf for tree in m.refinement.trees for leaf in tree.leaves]
            tokens += [leaf.token for leaf in leaves]
            allowed += [leaf.allowed for leaf in leaves]
            address, bits = "entry", max(cw, (len(tokens) - 1).bit_length())
        table = self._decode([self.literal("proposal_q", word) for word in tokens], 0, bits - 1, address)
        mask = self._decode([self.literal("allowed_q", word) for word in allowed], 0, bits - 1, address)
        lines.append(f"(define-fun table () {self._sort('proposal_q')} {table})")
        lines.append(f"(define-fun masks () {self._sort('allowed_q')} {mask})")
        claim = _all(
            [
                "(= t.valid_q s.in_valid)",
                "(= t.sla_ok_q s.sla_ok)",
                "(= t.override_request_q s.override_request)",
                "(= t.override_code_q s.override_code)",
                f"(= {self.bit('t.in_envelope_q')} envelope)",
                f"(=> (not envelope) {self.equals('t.cell_q', self.reference.no_cell)})",
                "(=> envelope (and (= t.cell_q cell) (= t.proposal_q table) (= t.allowed_q masks)))",
            ]
        )
        return [*lines, f"(assert (not {self.bit('s.rst')}))", f"(assert (not {claim}))"]

    def _entry(self) -> list[str]:
        """The definition of ``entry``, the reading's word among the cells' and then the leaves' (the artifact's
        leaf order, tree after tree): its cell's number, or in a refined cell n_cells plus the number of the leaf
        its tree gives the buses (docs/design.md, 'Box trees')."""
        m, cw = self.machine, self.width("cell_q")
        assert m.refinement is not None
        width = max(cw, (m.n_cells + m.refinement.n_leaves - 1).bit_length())
        lines = [
            "; the refined cells: in each, the reading's leaf by its box tree (docs/design.md, 'Box trees'): at a",
            "; split (input, t) the low child holds v < ceil(t * 2^frac_bits), the high child the rest; the words",
            "; are the cells' and then the leaves' (tree after tree), and a reading's entry is its cell, or in a",
            f"; refined cell {m.n_cells} + the number of its leaf",
        ]
        entries = [f"(_ bv{cell} {width})" for cell in range(m.n_cells)]
        first = m.n_cells
        for cell, tree in zip(m.refinement.cells, m.refinement.trees):
            lines.append(
                f"; cell {cell}: leaves {first - m.n_cells}..{first - m.n_cells + tree.n_leaves - 1}: "
                + "; ".join(
                    f"{leaf.status.value} {m.tokens[leaf.token]} mask {leaf.allowed:0{self.params.n_tokens}b}"
                    for leaf in tree.leaves
                )
            )

            def on_split(input: int, threshold: int, low: str, high: str) -> str:
                bus, signed = self.buses[input]
                at_least = "bvsge" if signed else "bvuge"
                return f"(ite ({at_least} s.{bus} {self.literal(bus, threshold)}) {high} {low})"

            entries[cell] = walk(tree, on_split, lambda k, first=first: f"(_ bv{first + k} {width})")
            first += tree.n_leaves
        return [*lines, f"(define-fun entry () (_ BitVec {width}) {self._decode(entries, 0, cw - 1, 'cell')})"]

    def _sort(self, name: str) -> str:
        return f"(_ BitVec {self.width(name)})"

    def _decode(self, terms: list[str], low: int, bit: int, address: str = "cell") -> str:
        """The term at `address` among terms[low : low + 2^(bit+1)], one address bit per level (a run of equal
        terms is one term)."""
        size = 1 << (bit + 1)
        chunk = terms[low : low + size]
        if len(set(chunk)) == 1 or bit < 0:
            return chunk[0]
        half = low + (1 << bit)
        if half >= len(terms):
            return self._decode(terms, low, bit - 1, address)
        return (
            f"(ite (= ((_ extract {bit} {bit}) {address}) #b1) {self._decode(terms, half, bit - 1, address)} "
            f"{self._decode(terms, low, bit - 1, address)})"
        )

    # ---------------------------------------------------------------- step: the state machine

    def _step(self) -> list[str]:
        p, n = self.params, self.params.n_tokens
        encoding = StepEncoding(p)
        token_of_code = " ".join(
            f"(ite (= s.override_code_q {self.literal('override_code_q', code)}) {k}" for k, code in enumerate(p.codes)
        )
        classes = " ".join(
            "(and (= prop {}) {})".format(
                proposal, " ".join(f"a_{k}" if mask >> k & 1 else f"(not a_{k})" for k in range(n))
            )
            for proposal, mask in self.classes
        )
        candidate = f"(ite {self.bit('t.candidate_valid')} {self.integer('t.candidate')} (- 1))"
        lines = [
            *encoding.declarations(),
            "; the encoding's state and inputs are the module's registers before the edge (port contract)",
            f"(assert (= cur {self.integer('s.current')}))",
            f"(assert (= cand (ite {self.bit('s.candidate_valid')} {self.integer('s.candidate')} (- 1))))",
            f"(assert (= cnt {self.integer('s.count')}))",
            f"(assert (= cd {self.integer('s.cooldown')}))",
            f"(assert (= env {self.bit('s.in_envelope_q')}))",
            f"(assert (= sla {self.bit('s.sla_ok_q')}))",
            f"(assert (= prop {self.integer('s.proposal_q')}))",
            *(f"(assert (= a_{k} {self.bit('s.allowed_q', k)}))" for k in range(n)),
            f"(assert (= ovr_on {self.bit('s.override_request_q')}))",
            "; override_code_q names the output index with that code, or none (-1), which is refused as "
            "not overridable",
            f"(assert (= ovr {token_of_code} (- 1){')' * n}))",
            "; every register state in the machine's domain; without a candidate the candidate register is 0",
            "(assert (domain cur cand cnt cd))",
            f"(assert (=> (not {self.bit('s.candidate_valid')}) {self.equals('s.candidate', 0)}))",
            f"; inside the envelope the pipeline holds one of the table's {len(self.classes)} (proposal, "
            "allowed mask) classes, which is what the sample claim shows it loads",
            f"(assert (=> env (or {classes})))",
            *encoding.step_definitions(),
            f"(assert (not {self.bit('s.rst')}))",
            f"(assert {self.bit('s.valid_q')})",
        ]
        claim = _all(
            [
                f"(= {self.integer('t.current')} n_cur)",
                f"(= {candidate} n_cand)",
                f"(= {self.integer('t.count')} n_cnt)",
                f"(= {self.integer('t.cooldown')} n_cd)",
                f"(=> (not {self.bit('t.candidate_valid')}) {self.equals('t.candidate', 0)})",
                f"(= {self.integer('t.token_code')} (code out))",
                f"(= {self.integer('t.reason_code')} reason)",
                "(= t.cell_index s.cell_q)",
                self.bit("t.out_valid"),
            ]
        )
        return [*lines, f"(assert (not {claim}))"]

    # ---------------------------------------------------------------- counterexamples

    def explain(self, name: str, value) -> str:
        """One line from a model of the negated claim: the differing input and state, expected against got."""
        if name == "sample":
            return self._explain_sample(value)
        if name == "step":
            return self._explain_step(value)
        shown = [*STATE_REGISTERS, *OUTPUTS] + (["valid_q"] if name == "reset" else [])
        before = ", ".join(f"{k}={value('s.' + k)}" for k in (*STATE_REGISTERS, "valid_q"))
        after = ", ".join(f"{k}={value('t.' + k)}" for k in shown)
        edge = "rst 1" if name == "reset" else "rst 0 and valid_q 0"
        return f"an edge with {edge} from registers {before} gives {after}; expected: {DESCRIPTIONS[name]}"

    def _signed(self, value, bus: str) -> int:
        raw, width = value(f"s.{bus}"), self.width(bus)
        return raw - (1 << width) if self.signed[bus] and raw >> (width - 1) & 1 else raw

    def _explain_sample(self, value) -> str:
        m, n = self.machine, self.params.n_tokens
        reading = [self._signed(value, bus) for bus, _ in self.buses]
        shown = ", ".join(f"{name}={v} ({v / (1 << bits):g})" for name, v, bits in zip(m.names, reading, m.frac_bits))
        cell = m.cell_of_fixed(reading)
        leaf = m.leaf_of_fixed(reading)
        got = (
            f"in_envelope_q={value('t.in_envelope_q')} cell_q={value('t.cell_q')} "
            f"proposal_q={value('t.proposal_q')} allowed_q={value('t.allowed_q'):0{n}b}"
        )
        passed = [
            (k, value(f"s.{source}"), value(f"t.{k}"))
            for k, source in (
                ("valid_q", "in_valid"),
                ("sla_ok_q", "sla_ok"),
                ("override_request_q", "override_request"),
                ("override_code_q", "override_code"),
            )
        ]
        wrong = [f"{k}={after} from input {before}" for k, before, after in passed if before != after]
        if cell == OUT_OF_ENVELOPE:
            expected = f"out of envelope: in_envelope_q=0 cell_q={self.reference.no_cell}"
        else:
            assert leaf is not None
            tree = None if m.refinement is None else m.refinement.tree_of(cell)
            where = "" if tree is None else f", leaf {tree.leaf_index_fixed(reading)} of its tree"
            expected = (
                f"cell {cell} ({m.describe_cell(cell)}{where}): in_envelope_q=1 cell_q={cell} "
                f"proposal_q={leaf.token} ({m.tokens[leaf.token]}) "
                f"allowed_q={leaf.allowed:0{n}b}"
            )
        tail = f"; and it loads {', '.join(wrong)}" if wrong else ""
        return f"in any state, reading {shown}: the artifact gives {expected}; the module loads {got}{tail}"

    def _explain_step(self, value) -> str:
        m, p = self.machine, self.params
        state = State(value("cur"), value("cand"), value("cnt"), value("cd"))
        sla_ok = bool(value("s.sla_ok_q"))
        override = value("ovr") if value("s.override_request_q") else None
        if value("s.in_envelope_q"):
            proposal, mask = value("prop"), value("s.allowed_q")
            row = tuple(bool(mask >> k & 1) for k in range(p.n_tokens))
            cell = self.classes.get((proposal, mask))
            where = (
                f"a reading in cell {cell} ({m.describe_cell(cell)}; table {m.tokens[proposal]}, allowed "
                + ", ".join(m.tokens[k] for k in range(p.n_tokens) if row[k])
                + ")"
            )
            after, token, reason = step(p, state, proposal, row, True, sla_ok, override)
        else:
            where = "a reading out of envelope"
            after, token, reason = step(p, state, None, None, False, sla_ok, override)
        code = value("s.override_code_q")
        requested = (
            "none"
            if override is None
            else f"code {code} ({m.tokens[override] if 0 <= override < p.n_tokens else 'no token'})"
        )
        got_state = State(
            value("t.current"),
            value("t.candidate") if value("t.candidate_valid") else NO_CANDIDATE,
            value("t.count"),
            value("t.cooldown"),
        )
        got_reason = value("t.reason_code")
        reason_name = Reason(got_reason).name if got_reason in {int(r) for r in Reason} else "not a reason"
        return (
            f"in state {_show(state)}, {where}, sla_ok={int(sla_ok)}, override {requested}: the artifact's "
            f"machine emits token code {p.codes[token]} ({m.tokens[token]}), reason {int(reason)} ({reason.name}) "
            f"and goes to {_show(after)}; the module emits token code {value('t.token_code')}, reason "
            f"{got_reason} ({reason_name}), cell_index {value('t.cell_index')}, out_valid "
            f"{value('t.out_valid')} and goes to {_show(got_state)}"
        )


def _show(state: State) -> str:
    return f"(current={state.current} candidate={state.candidate} count={state.count} cooldown={state.cooldown})"
