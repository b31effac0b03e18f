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
from ._leaves import walk
from ._netlist import Rom
from ._pieces import Piece
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


def _kept(terms: list[str], read: list[bool]) -> list[str]:
    """`terms` with each one not `read` replaced by the last read one before it (the first read one at the start),
    so that `Claims._decode` folds it into its neighbour's run; all of them when every term is read."""
    if all(read):
        return terms
    fill = next((term for term, is_read in zip(terms, read) if is_read), terms[0])
    kept = []
    for term, is_read in zip(terms, read):
        fill = term if is_read else fill
        kept.append(fill)
    return kept


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

    def claim(self, name: str, piece: Piece | None = None) -> list[str]:
        """The lines after the prefix: the claim `name`'s definitions, then its negation asserted; with `piece`
        (`_pieces.py`), the sample claim for that piece's readings."""
        claim = self._sample(piece) if piece is not None else getattr(self, f"_{name}")()
        return [*claim[:-1], f"; the claim, negated: {DESCRIPTIONS[name]}", claim[-1]]

    def body(self, name: str, piece: Piece | None = None) -> list[str]:
        """The whole query `name` (or its `piece`) as its file states it: the prefix, then the claim."""
        return [*self.prefix(), *self.claim(name, piece)]

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

    def _binning(self) -> list[str]:
        """The definitions of ``envelope.BUS``, ``bin.BUS``, ``envelope`` and ``cell``: the artifact's binning."""
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
        return lines

    def _sample(self, piece: Piece | None = None) -> list[str]:
        """The sample claim, or with `piece` its part for the piece's readings (`_pieces.py`): the piece's
        assumption asserted and the artifact's words restricted to the box's (sound because the cover query
        shows that the piece's readings lie in the box's cells)."""
        m, cw = self.machine, self.width("cell_q")
        lines = self._binning()
        kept = None if piece is None else set(piece.cells_of(m))
        is_outside = piece is not None and piece.bins is None
        if is_outside:
            lines.append("; out of envelope the claim reads no table word, so the table is not stated")
        else:
            if kept is None:
                lines.append("; the artifact's table and allowed masks: the word of cell c, decoded from the bits of c")
            else:
                lines.append(
                    "; the artifact's table and allowed masks, the box's words only: the word of cell c, decoded "
                    "from the bits of c (a word outside the box takes its predecessor's value, which the box's "
                    "readings never read: equivalence-sample-cover.smt2 shows that their bins lie in the box)"
                )
            for cell in range(m.n_cells) if kept is None else sorted(kept):
                status = "exact" if m.exact[cell] else "conservative"
                lines.append(
                    f"; cell {cell}: {m.describe_cell(cell)}: {status} {m.tokens[m.proposal[cell]]}, "
                    f"allowed mask {m.allowed[cell]:0{self.params.n_tokens}b}"
                )
            tokens, allowed, address, bits = list(m.proposal), list(m.allowed), "cell", cw
            read = [kept is None or cell in kept for cell in range(m.n_cells)]
            if m.refinement is not None:
                lines += self._entry(kept)
                for cell, tree in zip(m.refinement.cells, m.refinement.trees):
                    tokens += [leaf.token for leaf in tree.leaves]
                    allowed += [leaf.allowed for leaf in tree.leaves]
                    read += [kept is None or cell in kept] * tree.n_leaves
                address, bits = "entry", max(cw, (len(tokens) - 1).bit_length())
            table = self._decode(
                _kept([self.literal("proposal_q", word) for word in tokens], read), 0, bits - 1, address
            )
            mask = self._decode(
                _kept([self.literal("allowed_q", word) for word in allowed], read), 0, bits - 1, address
            )
            lines.append(f"(define-fun table () {self._sort('proposal_q')} {table})")
            lines.append(f"(define-fun masks () {self._sort('allowed_q')} {mask})")
        loaded = _all(["(= t.cell_q cell)", "(= t.proposal_q table)", "(= t.allowed_q masks)"])
        claim = _all(
            [
                "(= t.valid_q s.in_valid)",
                "(= t.sla_ok_q s.sla_ok)",
                "(= t.override_request_q s.override_request)",
                "(= t.override_code_q s.override_code)",
                f"(= {self.bit('t.in_envelope_q')} envelope)",
                f"(=> (not envelope) {self.equals('t.cell_q', self.reference.no_cell)})",
                *([] if is_outside else [f"(=> envelope {loaded})"]),
            ]
        )
        if piece is not None:
            lines += [
                f"; this piece's readings ({piece.name}): {piece.describe(m)}; the pieces together hold every "
                "reading (equivalence-sample-cover.smt2)",
                f"(assert {self.assumption(piece)})",
            ]
        return [*lines, f"(assert (not {self.bit('s.rst')}))", f"(assert (not {claim}))"]

    def assumption(self, piece: Piece) -> str:
        """The piece's readings as a term over the buses, from the artifact's thresholds and envelope
        (`_pieces.py` says why the pieces' assumptions hold every bus value)."""
        if piece.bins is None:
            return "(not envelope)"
        terms = ["envelope"]
        for (bus, signed), (interior, _, _), (low, high) in zip(self.buses, self.machine.fixed_point, piece.bins):
            at_least, below = ("bvsge", "bvslt") if signed else ("bvuge", "bvult")
            if low > 0:
                terms.append(f"({at_least} s.{bus} {self.literal(bus, interior[low - 1])})")
            if high < len(interior):
                terms.append(f"({below} s.{bus} {self.literal(bus, interior[high])})")
        return _all(terms)

    def in_box(self, piece: Piece) -> str:
        """The reading's bins (the artifact's ``bin.BUS``) lie in the piece's box."""
        assert piece.bins is not None
        cw, terms = self.width("cell_q"), []
        for (bus, _), n, (low, high) in zip(self.buses, self.machine.shape, piece.bins):
            if low > 0:
                terms.append(f"(bvuge bin.{bus} (_ bv{low} {cw}))")
            if high < n - 1:
                terms.append(f"(bvule bin.{bus} (_ bv{high} {cw}))")
        return _all(terms)

    def cover(self, pieces: tuple[Piece, ...]) -> list[str]:
        """The cover query (unsat: the pieces are the whole claim): a reading in none of `pieces`, or in a box
        piece but with its bins outside the box (each box piece states only its box's words). It reads the
        buses only, so it declares them itself and needs no transition relation."""
        lines = [
            "; the sample claim in pieces (certfsm hdl_export/_pieces.py): every value of the input buses lies in",
            "; one of the pieces, each stated from the artifact's integer thresholds and envelope, and the bins of",
            "; a reading in a box piece lie in its box",
            *(f"(declare-const s.{bus} (_ BitVec {self.width(bus)}))" for bus, _ in self.buses),
            *self._binning(),
        ]
        boxed = []
        for piece in pieces:
            lines += [
                f"; {piece.name}: {piece.describe(self.machine)}",
                f"(define-fun piece.{piece.name} () Bool {self.assumption(piece)})",
            ]
            if piece.bins is not None:
                lines.append(f"(define-fun box.{piece.name} () Bool {self.in_box(piece)})")
                boxed.append(f"(=> piece.{piece.name} box.{piece.name})")
        held = f"(or {' '.join(f'piece.{piece.name}' for piece in pieces)})"
        lines.append("; the claim, negated: some reading lies in no piece, or in a box piece outside its box")
        lines.append(f"(assert (not {_all([held, *boxed])}))")
        return lines

    def _entry(self, kept: set[int] | None = None) -> list[str]:
        """The definition of ``entry``, the reading's word among the cells' and then the leaves' (the artifact's
        leaf order, tree after tree): its cell's number, or in a refined cell n_cells plus the number of the leaf
        its tree gives the buses (docs/design.md, 'Box trees'); with `kept`, only the trees of those cells (another
        cell's entry takes its predecessor's)."""
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
            if kept is not None and cell not in kept:
                first += tree.n_leaves
                continue
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
        read = [kept is None or cell in kept for cell in range(m.n_cells)]
        return [
            *lines,
            f"(define-fun entry () (_ BitVec {width}) {self._decode(_kept(entries, read), 0, cw - 1, 'cell')})",
        ]

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

    def reading(self, value) -> str:
        """The buses' values in a model, each as its integer and the real number it means."""
        m = self.machine
        reading = [self._signed(value, bus) for bus, _ in self.buses]
        return ", ".join(f"{name}={v} ({v / (1 << bits):g})" for name, v, bits in zip(m.names, reading, m.frac_bits))

    def _explain_sample(self, value) -> str:
        m, n = self.machine, self.params.n_tokens
        reading = [self._signed(value, bus) for bus, _ in self.buses]
        shown = self.reading(value)
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
