"""The certified machine described once as hardware: ports, comparator banks, ROMs, registers, the rule chain.

Built from `certfsm.machine.Machine` (decoded by `Machine.from_artifact`,
the one decoder) and nothing else, so the hardware states no rule of its
own: binning uses the machine's integer thresholds and envelope
(`Machine.fixed_point`), the ROMs hold its table and allowed masks, and
the rule chain is `certfsm.machine.step` in the same priority order
(`_rule_chain.py`, with the state registers and outputs it loads).
The printers (`_verilog.py`, and a C printer on the same structure) only
turn these nodes into text.

Port contract (the formal-equivalence check and the test bench rely on it):

- ``clk``: every register loads on the rising edge. ``rst``: synchronous,
  active high; on an edge where it is 1 the machine state becomes the
  initial state (the conservative token, no candidate, count 0, cooldown
  0), the pipeline empties and the outputs take their reset values
  (``out_valid`` 0, ``token_code`` the conservative token's code,
  ``reason_code`` 0, ``cell_index`` all ones).
- One input bus per machine input, named after it: the integer v meaning
  v * 2^-frac_bits; unsigned when the envelope's lower end is >= 0, else
  signed (two's complement); wide enough for the envelope and one value
  above it (a signed bus also one below), so an over-range reading is
  seen as out of envelope.
- ``in_valid``: the inputs of this cycle are one reading. ``sla_ok``: the
  SLA monitor's verdict for it. ``override_request`` with
  ``override_code`` (a 4-bit token code): an operator override; a code
  that is no token's code is refused as not overridable, exactly like a
  Python override that names no overridable token.
- Latency `LATENCY` = 2: the reading sampled at rising edge n (in_valid 1)
  is binned (and in a refined cell, its leaf found: `_leaves.py`) and
  the table and mask words of its cell or leaf are read (block RAM) at
  that edge; its decision is loaded into the outputs and the state at edge
  n + 1, with ``out_valid`` 1. One decision per clock. An edge with
  ``valid_q`` 0 leaves the state and the outputs unchanged
  (``out_valid`` 0).
- Outputs: ``token_code`` [3:0] (the new current token's code),
  ``reason_code`` [3:0] (`certfsm.machine.Reason`), ``cell_index`` (the flat
  C-order cell index of `Machine.cell_of_fixed`; all ones, never a cell,
  when out of envelope), ``out_valid``.
- State registers, mapped to `certfsm.machine.State`: ``current`` (output
  index), ``candidate_valid`` with ``candidate`` (candidate is
  NO_CANDIDATE when candidate_valid is 0; both are 0 then), ``count``,
  ``cooldown``. Pipeline registers: ``valid_q``, ``in_envelope_q``,
  ``cell_q``, ``sla_ok_q``, ``override_request_q``, ``override_code_q``,
  ``proposal_q`` and ``allowed_q`` (the ROM words of the cell, or of its
  leaf in a refined cell).
"""

from __future__ import annotations

import functools
import keyword
import re
from dataclasses import dataclass

from certfsm import SpecError, TableSize
from certfsm.machine import NO_CANDIDATE, Machine, Reason, State

from ._leaves import entry_count, first_leaves, leaf_lookup, leaf_rom_entries
from ._netlist import ComparatorBank, Const, Constant, Module, Port, Ref, Register, Rom, RomEntry, Wire, all_of, mux, op
from ._rule_chain import output_registers, rule_chain, rule_inputs, state_registers

LATENCY = 2
"""Rising edges from the one that samples a reading to the one that shows its decision, counted inclusive."""

STATE_REGISTERS = ("current", "candidate_valid", "candidate", "count", "cooldown")
_VERILOG_2005 = """always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config deassign
default defparam design disable edge else end endcase endconfig endfunction endgenerate endmodule endprimitive
endspecify endtable endtask event for force forever fork function generate genvar highz0 highz1 if ifnone incdir
include initial inout input instance integer join large liblist library localparam macromodule medium module nand
negedge nmos nor noshowcancelled not notif0 notif1 or output parameter pmos posedge primitive pull0 pull1 pulldown
pullup pulsestyle_ondetect pulsestyle_onevent rcmos real realtime reg release repeat rnmos rpmos rtran rtranif0
rtranif1 scalared showcancelled signed small specify specparam strong0 strong1 supply0 supply1 table task time tran
tranif0 tranif1 tri tri0 tri1 triand trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor
xnor xor"""
_C99 = """auto break char const continue do double enum extern float goto inline long register restrict return short
sizeof static struct switch typedef union void volatile"""
_PORTS = "clk rst in_valid sla_ok override_request override_code token_code reason_code cell_index out_valid"
_INTERNAL = """in_envelope reading_cell table_rom mask_rom table_word mask_word valid_q in_envelope_q cell_q sla_ok_q
override_request_q override_code_q proposal_q allowed_q reading_entry split_bits tree_root tree_test
tree_low tree_high tree_code current candidate_valid candidate count cooldown override_token
override_is_token counted_down cooldown_expired current_allowed override_obeyable override_refusal proposal_count
confirmed next_current next_candidate_valid next_candidate next_count next_cooldown next_reason next_token_code"""
_RESERVED = frozenset(f"{_VERILOG_2005} {_C99} {_PORTS} {_INTERNAL}".split()) | frozenset(keyword.kwlist)


@dataclass(frozen=True)
class Hardware:
    """The module and the facts the test bench and the checks need about it."""

    module: Module
    machine: Machine
    token_width: int
    cell_width: int
    count_width: int
    cooldown_width: int

    @functools.cached_property
    def banks(self) -> tuple[ComparatorBank, ...]:
        """Cached: the test bench reads the banks on every edge it writes."""
        return tuple(node for node in self.module.body if isinstance(node, ComparatorBank))

    @property
    def no_cell(self) -> int:
        """The `cell_index` output out of envelope: all ones, which is never a cell index."""
        return (1 << self.cell_width) - 1

    @property
    def state_widths(self) -> tuple[int, ...]:
        """The widths of the state registers, in `STATE_REGISTERS` order."""
        return (self.token_width, 1, self.token_width, self.count_width, self.cooldown_width)

    @staticmethod
    def register_values(state: State) -> dict[str, int]:
        """The state registers (`STATE_REGISTERS`, in order) that hold a machine `State`."""
        has_candidate = state.candidate != NO_CANDIDATE
        return {
            "current": state.current,
            "candidate_valid": int(has_candidate),
            "candidate": state.candidate if has_candidate else 0,
            "count": state.count,
            "cooldown": state.cooldown,
        }

    @staticmethod
    def state_of(registers) -> State:
        """The machine `State` that state-register values (a mapping by name) stand for."""
        candidate = registers["candidate"] if registers["candidate_valid"] else NO_CANDIDATE
        return State(registers["current"], candidate, registers["count"], registers["cooldown"])


def identifier(name: str) -> str:
    """A Verilog and C identifier for a spec name: other characters become _, a clash gets the prefix in_."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not text or text[0].isdigit() or text.lower() in _RESERVED:
        text = "in_" + text
    return text


def default_module_name(spec_name: str) -> str:
    return "certfsm_" + re.sub(r"[^A-Za-z0-9_]", "_", spec_name or "controller")


def check_module_name(name: str, *, parameter: str = "module") -> str:
    """`name` if it is a Verilog and C identifier; else a SpecError naming it as the caller's `parameter`."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name) or name.lower() in _RESERVED:
        raise SpecError(
            f"{parameter}={name!r} is not a Verilog module name; give letters, digits and _ "
            f"(not first a digit, not a keyword), e.g. {parameter}='certfsm_controller'"
        )
    return name


def _bus_shape(low: int, high: int) -> tuple[int, bool]:
    """(width, signed) holding low - 1 .. high + 1 (low - 1 only when it is >= 0 or the bus is signed)."""
    if low >= 0:
        return max(1, (high + 1).bit_length()), False
    width = 1
    while not (-(1 << (width - 1)) <= low - 1 and high + 1 <= (1 << (width - 1)) - 1):
        width += 1
    return width, True


def _width(largest: int) -> int:
    return max(1, int(largest).bit_length())


@dataclass(frozen=True)
class _Widths:
    """The bit widths every step below sizes its signals with, derived once from the machine."""

    token: int
    cell: int
    count: int
    cooldown: int
    mask: int
    entry: int

    @classmethod
    def of(cls, machine: Machine) -> "_Widths":
        """Each width holds its largest value: the last output index, the cell count (NO_CELL), the counters, the
        last ROM address (a refined table's leaves follow its cells); the ROM words are as `certfsm.TableSize`
        lays them out (the one home of that layout)."""
        params = machine.params
        rom = TableSize(machine.shape, params.n_tokens)
        cell = _width(machine.n_cells)
        return cls(
            rom.token_bits,
            cell,
            _width(params.confirm_cycles),
            _width(params.cooldown_cycles),
            rom.mask_bits,
            max(cell, _width(entry_count(machine) - 1)),
        )


def hardware_of(machine: Machine, module_name: str, units: tuple[str, ...] | None = None) -> Hardware:
    """Describe `machine` as one synchronous module named `module_name` (SpecError without frac_bits).

    The recipe, in the order of the module's body: one comparator bank per
    input bus bins the reading, the bins make the flat cell index, in a
    refined table the split tests and the cell's tree give the reading's
    leaf (`_leaves.py`), the index (of the cell, or of the leaf) reads the
    table and mask ROMs, pipeline registers hold the words for one clock,
    and on the next edge the rule chain of `certfsm.machine.step` loads
    the state and output registers.
    """
    check_module_name(module_name, parameter="module_name")
    w = _Widths.of(machine)
    input_ports, banks = _input_buses(machine, _input_identifiers(machine), units or ("",) * machine.n_inputs)
    ports = (*_CLOCK_PORTS, *input_ports, *_control_ports(w))
    leaves, address = leaf_lookup(machine, banks, w)
    body = (
        *banks,
        *_reading_cell(machine, banks, w),
        *leaves,
        *_roms(machine, w, address),
        *_pipeline_registers(w),
        *state_registers(machine, w),
        *rule_inputs(machine, w),
        rule_chain(w),
        *output_registers(machine, w),
    )
    module = Module(module_name, _header(machine), ports, tuple(_constants(machine, w)), body, LATENCY)
    return Hardware(module, machine, w.token, w.cell, w.count, w.cooldown)


def _input_identifiers(machine: Machine) -> list[str]:
    """The Verilog and C name of each input; a SpecError when two inputs' signals would share a name.

    Why: each input gives three signals (the bus, NAME_bin, NAME_in_envelope), and `identifier` maps
    several spellings to one, so two inputs could otherwise silently drive one wire.
    """
    names = [identifier(name) for name in machine.names]
    derived = [f"{name}{suffix}" for name in names for suffix in ("", "_bin", "_in_envelope")]
    if len(set(derived)) != len(derived):
        raise SpecError(
            f"inputs {list(machine.names)} give the Verilog names {names}, whose signals (NAME, NAME_bin, "
            "NAME_in_envelope) repeat; rename the inputs in the spec so that they stay apart"
        )
    return names


_CLOCK_PORTS = (
    Port("clk", "input", 1, False, "rising-edge clock"),
    Port("rst", "input", 1, False, "synchronous reset, active high"),
)
"""The ports before the input buses (the port contract's clocking)."""


def _input_buses(machine: Machine, names: list[str], units) -> tuple[list[Port], list[ComparatorBank]]:
    """One input port and one comparator bank per input, binning with the machine's own integer thresholds.

    Why a bus one value wider than the envelope: an over-range reading must be seen as out of envelope,
    not wrap into a cell. An input whose envelope holds no grid value is refused here, since such a
    machine would always fall back.
    """
    ports, banks = [], []
    for index, ((interior, low, high), ident) in enumerate(zip(machine.fixed_point, names)):
        bits = machine.frac_bits[index]
        if low > high:
            raise SpecError(
                f"inputs[{index}] ({machine.names[index]}): no value v * 2^-{bits} lies in the envelope "
                f"[{machine.edges[index][0]:g}, {machine.edges[index][-1]:g}], so the hardware would "
                "always fall back; raise frac_bits of that input in the spec"
            )
        width, signed = _bus_shape(low, high)
        ports.append(
            Port(
                ident,
                "input",
                width,
                signed,
                f"{machine.names[index]} as v * 2^-{bits}" + (f" {units[index]}" if units[index] else ""),
            )
        )
        bins = len(machine.edges[index]) - 1
        banks.append(
            ComparatorBank(
                machine.names[index],
                Ref(ident, width),
                signed,
                bits,
                units[index],
                machine.edges[index],
                tuple(interior),
                low,
                high,
                Ref(f"{ident}_bin", _width(bins - 1)),
                Ref(f"{ident}_in_envelope", 1),
            )
        )
    return ports, banks


def _control_ports(w: _Widths) -> list[Port]:
    """The ports after the input buses: the cycle's other inputs, then the registered outputs."""
    return [
        Port("in_valid", "input", 1, False, "the inputs of this cycle are one reading"),
        Port("sla_ok", "input", 1, False, "the SLA holds for this reading"),
        Port("override_request", "input", 1, False, "an operator override is requested this cycle"),
        Port("override_code", "input", 4, False, "the 4-bit code of the requested token"),
        Port("token_code", "output", 4, False, "the emitted token's code (the new current token)"),
        Port("reason_code", "output", 4, False, "why (certfsm.machine.Reason)"),
        Port("cell_index", "output", w.cell, False, "the reading's flat cell index; all ones out of envelope"),
        Port("out_valid", "output", 1, False, f"the outputs hold a decision ({LATENCY} cycles after in_valid)"),
    ]


def _constants(machine: Machine, w: _Widths) -> list[Constant]:
    """The machine's parameters and every reason code as named constants, so the rule chain reads by name."""
    params = machine.params
    constants = [
        Constant(
            "CONSERVATIVE",
            w.token,
            params.conservative,
            f"output index of {machine.tokens[params.conservative]}, the conservative token",
        ),
        Constant("CONFIRM_CYCLES", w.count, params.confirm_cycles, "a new token must be proposed this often"),
        Constant("COOLDOWN_CYCLES", w.cooldown, params.cooldown_cycles, "cycles between switches"),
        Constant(
            "OVERRIDABLE",
            w.mask,
            sum(1 << t for t in params.overridable),
            "bit t: output index t may be forced by an override ("
            + ", ".join(machine.tokens[t] for t in sorted(params.overridable))
            + ")",
        ),
        Constant("NO_CELL", w.cell, (1 << w.cell) - 1, "the cell output out of envelope"),
    ]
    return constants + [Constant(f"REASON_{r.name}", 4, int(r), "") for r in Reason]


def _reading_cell(machine: Machine, banks: list[ComparatorBank], w: _Widths) -> tuple[Wire, Wire]:
    """The wires `in_envelope` and `reading_cell`: the banks' bins combined into the flat C-order cell index.

    Why C order: it is `Machine.cell_of_fixed`'s index, which the ROMs are laid out by and the
    `cell_index` output reports.
    """
    cell_terms = []
    for bank, stride in zip(banks, machine.strides):
        term = bank.bin if bank.bin.width == w.cell else op("zext", bank.bin, width=w.cell)
        cell_terms.append(term if stride == 1 else op("*", term, Const(stride, w.cell), width=w.cell))
    cell_index = cell_terms[0]
    for term in cell_terms[1:]:
        cell_index = op("+", cell_index, term, width=w.cell)
    in_envelope = all_of(*(bank.in_envelope for bank in banks))
    return (
        Wire("in_envelope", 1, in_envelope, "every input inside its envelope"),
        Wire("reading_cell", w.cell, cell_index, "the flat cell index, C order (the last input varies fastest)"),
    )


def _roms(machine: Machine, w: _Widths, address: Ref) -> tuple[Rom, Rom]:
    """The table ROM (each cell's proposal) and the mask ROM (each cell's allowed tokens), one commented line per cell,
    then in a refined table one per leaf (`_leaves.py`), read at `address`.

    Why the comments: a reviewer finds any cell's or leaf's bounds, status and token in the Verilog itself
    (provenance).
    """
    # Every bin is below its input's bin count, so reading_cell is always a cell (reading_entry a cell or a leaf)
    # and the word past the table is never read. It repeats cell 0's word, so each ROM holds only the table's
    # words: a bit that is the same in every cell stays constant, and yosys still drops it from the block RAM.
    size = entry_count(machine)
    beyond = (
        f"no cell: reading_cell is always below {machine.n_cells}, so never read; cell 0's word"
        if machine.refinement is None
        else f"no cell or leaf: reading_entry is always below {size}, so never read; cell 0's word"
    )
    refined = first_leaves(machine)

    def status(cell: int, exact: bool) -> str:
        if cell in refined:
            return "refined (its leaves decide; this conservative word is never read)"
        return "exact" if exact else "conservative"

    def allowed(mask: int) -> str:
        return "allowed " + ", ".join(machine.tokens[t] for t in range(w.mask) if mask >> t & 1)

    def token(leaf) -> str:
        return machine.tokens[leaf.token]

    table = Rom(
        "table_rom",
        "table_word",
        w.token,
        address,
        tuple(
            RomEntry(p, f"cell {c}: {machine.describe_cell(c)}: {status(c, e)} {machine.tokens[p]}")
            for c, (p, e) in enumerate(zip(machine.proposal, machine.exact))
        )
        + tuple(leaf_rom_entries(machine, lambda leaf: leaf.token, lambda leaf: f"{leaf.status.value} {token(leaf)}")),
        RomEntry(machine.proposal[0], beyond),
        False,
        "the certified table: the proposed output index of every cell, with its bounds and status"
        + ("" if machine.refinement is None else ", then of every leaf of the refined cells"),
    )
    masks = Rom(
        "mask_rom",
        "mask_word",
        w.mask,
        address,
        tuple(RomEntry(m, f"cell {c}: {allowed(m)}") for c, m in enumerate(machine.allowed))
        + tuple(leaf_rom_entries(machine, lambda leaf: leaf.allowed, lambda leaf: allowed(leaf.allowed))),
        RomEntry(machine.allowed[0], beyond),
        True,
        "bit t: output index t may be emitted in the cell (the legality rules)"
        + ("" if machine.refinement is None else ", then in the leaf"),
    )
    return table, masks


def _pipeline_registers(w: _Widths) -> list[Register]:
    """What the sampling edge keeps of a reading for the deciding edge: the port contract's first clock.

    Why a pipeline: the ROMs are read synchronously (block RAM), so the cell's words arrive one edge later.
    """
    return [
        Register("valid_q", 1, Ref("in_valid", 1), 0, None, "a reading was sampled at the last edge"),
        Register("in_envelope_q", 1, Ref("in_envelope", 1), None, None, "it was inside the envelope"),
        Register(
            "cell_q",
            w.cell,
            mux(Ref("in_envelope", 1), Ref("reading_cell", w.cell), Ref("NO_CELL", w.cell)),
            None,
            None,
            "its cell, or NO_CELL",
        ),
        Register("sla_ok_q", 1, Ref("sla_ok", 1), None, None, ""),
        Register("override_request_q", 1, Ref("override_request", 1), None, None, ""),
        Register("override_code_q", 4, Ref("override_code", 4), None, None, ""),
        Register(
            "proposal_q",
            w.token,
            Ref("table_word", w.token),
            None,
            None,
            "the table's proposal for the cell (synchronous ROM read: block RAM)",
        ),
        Register(
            "allowed_q",
            w.mask,
            Ref("mask_word", w.mask),
            None,
            None,
            "the cell's allowed mask (synchronous ROM read: block RAM)",
        ),
    ]


def _header(machine: Machine) -> tuple[str, ...]:
    """The module's header comment: which artifact, which grid and tokens, the parameters and the latency."""
    params, refinement = machine.params, machine.refinement
    refined = []
    if refinement is not None:
        refined.append(
            f"refined: {len(refinement.cells)} cells split into {refinement.n_leaves} leaves (box trees at most "
            f"{max(tree.depth for tree in refinement.trees)} splits deep); a reading in a refined cell is decided "
            "by its leaf's words, found in the same clock as its cell"
        )
    return (
        f"certfsm: the certified machine of artifact sha256 {machine.artifact_sha256 or '(none)'}",
        f"inputs: {', '.join(machine.names)}; grid {' x '.join(map(str, machine.shape))} = {machine.n_cells} cells",
        *refined,
        "tokens: " + ", ".join(f"{t}={c}" for t, c in zip(machine.tokens, params.codes)),
        f"machine: {params.describe()}",
        f"latency: {LATENCY} cycles (reading sampled at edge n, decision on the outputs after edge n + 1); "
        "one decision per clock",
    )
