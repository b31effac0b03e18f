"""The node types of the hardware description: a tiny netlist-like IR that every printer walks.

Why not Amaranth: its Verilog goes through yosys's back-end, which renames
signals, flattens the decision into processes and drops comments, so a ROM
line could no longer name its cell and a reviewer could not find the
priority order; and it prints no C. A dozen frozen dataclasses are enough
for this one fixed shape of machine (comparator banks, two ROMs, a few
registers, a priority chain of rules), and each printer (Verilog, C)
maps every node to its text in one place.

Invariants the builder (`_hardware.py`, the deciding edge in
`_rule_chain.py`) keeps and the printers rely on: every name is a legal
identifier in Verilog and C and unique in the module; every name an
expression refers to is a port, a constant or a node of `Module.body`
(the state registers and the rule chain refer to each other, so a
printer declares every name before any logic); the operands of a binary
operator have the same width, so no printer needs implicit widening.
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------ expressions


@dataclass(frozen=True)
class Const:
    """An unsigned literal of `width` bits."""

    value: int
    width: int


@dataclass(frozen=True)
class Ref:
    """A reference to a named port, constant, wire, register, lookup or ROM word."""

    name: str
    width: int


@dataclass(frozen=True)
class Op:
    """An operator applied to operands, with the width of its result.

    `op` is one of: ``== != >= <= < > + - * && || !`` (as in Verilog and
    C), ``?:`` (condition, then, else), ``[]`` (the bit of a named signal
    at a dynamic index) and ``zext`` (zero extension of the one operand to
    `width`).
    """

    op: str
    args: tuple
    width: int


Expr = Const | Ref | Op


def op(operator: str, *args: Expr, width: int = 1) -> Op:
    """`operator` applied to `args`, its result `width` bits wide (1: a condition)."""
    return Op(operator, tuple(args), width)


def eq(a: Expr, b: Expr) -> Op:
    return op("==", a, b)


def all_of(*terms: Expr) -> Expr:
    """The conjunction of `terms`, left to right (one term: the term itself)."""
    result = terms[0]
    for term in terms[1:]:
        result = op("&&", result, term)
    return result


def not_(a: Expr) -> Op:
    return op("!", a)


def mux(condition: Expr, then: Expr, otherwise: Expr) -> Op:
    """`then` where `condition` holds, else `otherwise`; as wide as `then`."""
    return op("?:", condition, then, otherwise, width=then.width)


# ------------------------------------------------------------------ declarations


@dataclass(frozen=True)
class Port:
    """A module port; `direction` is ``input`` or ``output``; an output is driven by the register of its name."""

    name: str
    direction: str
    width: int
    signed: bool
    doc: str


@dataclass(frozen=True)
class Constant:
    """A named constant (a Verilog localparam, a C enum or #define)."""

    name: str
    width: int
    value: int
    doc: str


@dataclass(frozen=True)
class ComparatorBank:
    """Binning of one fixed-point input bus by integer compares only (docs/semantics.md, "Fixed point").

    `bin` is the number of `thresholds` t with ``bus >= t`` (the thresholds
    are non-decreasing, so a priority chain from the top gives the same
    count); `in_envelope` is ``low <= bus <= high``. `edges` are the real
    bin edges the thresholds stand for (ceil(edge * 2^frac_bits)), kept for
    the comments.
    """

    input_name: str
    bus: Ref
    signed: bool
    frac_bits: int
    unit: str
    edges: tuple[float, ...]
    thresholds: tuple[int, ...]
    low: int
    high: int
    bin: Ref
    in_envelope: Ref

    @property
    def always_met(self) -> int:
        """How many thresholds every bus value meets: an unsigned bus is never below a threshold <= 0.

        The bins under them hold no bus value, so the printers end the
        compare chain there (a constant compare would leave Verilog's
        `always @*` with nothing to wait on).
        """
        return 0 if self.signed else sum(1 for threshold in self.thresholds if threshold <= 0)


@dataclass(frozen=True)
class Wire:
    """A named combinational value."""

    name: str
    width: int
    expr: Expr
    doc: str


@dataclass(frozen=True)
class RomEntry:
    """One word of a ROM and the comment that names what it holds (for a table word: its cell)."""

    value: int
    comment: str


@dataclass(frozen=True)
class Rom:
    """A read-only memory `name` and its combinational read: `word` is the entry at `address`.

    `entries` hold the addresses from 0; `default` is the word at every
    address beyond them (the address bus is wider than the table), its
    comment saying why that word is safe. A register that loads `word`
    makes the read synchronous, which is what block RAM is.
    `is_bit_mask`: each bit of a word means something of its own, so the
    printers write the words bit by bit.
    """

    name: str
    word: str
    width: int
    address: Ref
    entries: tuple[RomEntry, ...]
    default: RomEntry
    is_bit_mask: bool
    doc: str


@dataclass(frozen=True)
class Lookup:
    """A combinational case table: `selector` value -> constant, `default` for every other value."""

    name: str
    width: int
    selector: Ref
    cases: tuple[tuple[int, int, str], ...]
    default: int
    doc: str


@dataclass(frozen=True)
class SplitTest:
    """One split of a refined cell's box tree: the 1-bit `name` is ``bus >= threshold`` on a fixed-point bus.

    The threshold is the split's integer ceil(t * 2^frac_bits) (docs/design.md, "Box trees"), compared signed
    where the bus is signed, exactly as a comparator bank compares a bin threshold; `doc` names the real value.
    """

    name: str
    bus: Ref
    signed: bool
    threshold: int
    doc: str


@dataclass(frozen=True)
class Select:
    """A combinational case on `selector`: the expression of the case whose key equals it, else `default`.

    Where a `Lookup` maps keys to constants, each case here is an expression (a refined cell's tree of
    `SplitTest` bits), printed as one arm of a parallel case (a switch in C), never a priority chain.
    """

    name: str
    width: int
    selector: Ref
    cases: tuple[tuple[int, Expr, str], ...]
    default: Expr
    doc: str


@dataclass(frozen=True)
class Register:
    """A clocked register: loads `next` on each rising edge where `enable` holds (always when None).

    `reset` is its value after a synchronous reset, or None for a register
    that no reset touches (the ROM read registers, so that they map onto
    block RAM output registers).
    """

    name: str
    width: int
    next: Expr
    reset: int | None
    enable: Expr | None
    doc: str


@dataclass(frozen=True)
class Rule:
    """One rule of the priority chain: when `guard` holds (and no earlier rule did), assign `values`."""

    title: str
    guard: Expr
    values: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True)
class Decision:
    """A priority chain: the first rule whose guard holds assigns every target; the last rule has no guard."""

    targets: tuple[tuple[str, int], ...]
    rules: tuple[Rule, ...]
    otherwise: Rule
    doc: str


Node = ComparatorBank | SplitTest | Select | Wire | Rom | Lookup | Register | Decision


@dataclass(frozen=True)
class Module:
    """One synchronous module: ports, named constants and the body in declaration order."""

    name: str
    doc: tuple[str, ...]
    ports: tuple[Port, ...]
    constants: tuple[Constant, ...]
    body: tuple[Node, ...]
    latency: int
