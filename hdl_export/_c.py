"""The C printer: one walk over the same `Module` the Verilog printer walks gives a C99 header and source.

All C of the export is written here. The program is the module with its
clock taken out: one call of ``NAME_step`` is one decision, in the same
order of nodes as the Verilog (comparator banks, in a refined table the
split tests and a walk of the cell's tree to the leaf's ROM address over
static const node arrays (`_c_trees.py`), ROMs, the rule chain, the code
lookup). The pipeline registers become locals computed in the same
call (a microcontroller has no reason to wait two cycles), the state
registers live in ``NAME_state`` and load at the end of the call, and the
output registers in ``NAME_output`` load under the same enable as in the
Verilog (``in_valid`` 0 leaves the state and the outputs, and clears
``out_valid``). ``NAME_reset`` is the synchronous reset. Integers only:
the buses are the fixed-point integers of the port contract, every other
value an ``uint32_t`` masked to its width where an operator could carry
past it; no floating point, no heap, no library beyond <stdint.h>.

The header names every code the interface carries: ``CERTFSM_TOKEN_<NAME>``
for each token's 4-bit code (``token_code``, ``override_code``) and
``CERTFSM_REASON_<NAME>`` for each value of `certfsm.machine.Reason`
(``reason_code``), read from the machine and from the enum itself (no
second list), each with what it means; the source uses the reason
constants of the header in its rule chain.

The text follows MISRA C:2012 (`_Printer` says how) but for the rules of
`MISRA_DEVIATIONS`, which both files' header comments list with their
reasons and which the ``misra`` check of `certfsm export-c --check`
(`_c_checks.py`) accepts and nothing else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from certfsm import SpecError
from certfsm.machine import Machine, Reason

from ._c_trees import print_tree_lookup
from ._hardware import STATE_REGISTERS, Hardware
from ._netlist import ComparatorBank, Const, Decision, Lookup, Module, Op, Ref, Register, Rom, Select, SplitTest, Wire

_INDENT = "    "
_C_DOCS = {
    "out_valid": "1 when this call decided (in_valid was 1), else 0",
    "in_valid": "1: this is a reading, decide; 0: leave the state and the outputs",
    "override_code": "the 4-bit code of the requested token (CERTFSM_TOKEN_* above); any other code is refused",
    "token_code": "the emitted token's code (the new current token): one of the CERTFSM_TOKEN_* codes above",
    "reason_code": "why this call emitted token_code: one of the CERTFSM_REASON_* codes above",
}
_TOKEN_CODE_SELECTORS = frozenset(("override_code_q",))
"""Lookups selected by these signals have token codes as keys: the source writes them as CERTFSM_TOKEN_*."""
_TOKEN_CODE_SIGNALS = frozenset(("next_token_code", "token_code"))
"""Lookups and registers whose values are token codes: the source writes them as CERTFSM_TOKEN_*, so that every
macro of the header is used (MISRA C:2012 Rule 2.5) and the C says which token, not which number."""
_C_NAME_LENGTH = 63
"""Significant characters of a macro name in C99 (and for MISRA C:2012 Rule 5.4): names equal this far collide."""

REASON_MEANINGS: dict[Reason, str] = {
    Reason.KEEP_CURRENT: "kept the current token: the table proposes it",
    Reason.SWITCH: "switched to the table's proposal: proposed confirm_cycles calls in a row, cooldown expired",
    Reason.HOLD_CONFIRMING: "kept the current token: the table proposes another, not yet confirm_cycles calls in a row",
    Reason.HOLD_COOLDOWN: "kept the current token: the table's proposal is confirmed but the cooldown runs",
    Reason.MOVE_DOWN: "moved to the conservative token at once: the table proposes it",
    Reason.LEGALITY_PREEMPT: "moved to the conservative token at once: the current token is not allowed in the cell",
    Reason.FALLBACK_ENVELOPE: "the conservative token: the reading is out of the envelope (cell_index all ones)",
    Reason.FALLBACK_SLA: "the conservative token: sla_ok was 0 for a reading in the envelope",
    Reason.OVERRIDE: "the override was obeyed: token_code is the requested token",
    Reason.OVERRIDE_WAITING: "an override to be obeyed waits for the cooldown: the current token is kept meanwhile",
    Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE: "the override was refused (override_code is no overridable token's "
    "code); the table decided token_code",
    Reason.OVERRIDE_REFUSED_FORBIDDEN: "the override was refused (its token is not allowed in the cell); the table "
    "decided token_code",
}
"""What each reason code means, in the header's words (docs/semantics.md, "State machine"); the values and names
come from `Reason` itself, and a test holds the keys to it."""
_COMPARISONS = frozenset(("==", "!=", ">=", "<=", "<", ">"))
_BOOLEAN = _COMPARISONS | {"&&", "||", "!"}


class Deviation(NamedTuple):
    """A MISRA C:2012 rule the exported C does not follow, and why that is safe."""

    rule: str
    reason: str


MISRA_DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        "8.7",
        "NAME_reset and NAME_step have external linkage because they are the interface: the "
        "integrator's translation units call them, and the check sees the exported files alone",
    ),
)
"""The one list of deviations: printed into the header comment of both files and the only findings the
``misra`` check of `certfsm export-c --check` accepts (`_c_checks.misra_check`)."""


def _comment(text: str) -> str:
    """A one-line C comment; a comment opener or closer or ``//`` in the text (spec names, units) is broken up."""
    for sequence, harmless in (("/*", "/ *"), ("*/", "* /"), ("//", "/ /")):
        text = text.replace(sequence, harmless)
    return f"/* {text} */"


def _mask(width: int) -> str:
    return f"0x{(1 << width) - 1:X}u"


def _bus_type(width: int) -> str:
    return "int32_t" if width <= 31 else "int64_t"


def _bus_literal(width: int):
    """How a constant compared with a bus of `width` bits is written: a plain (signed) int, INT64_C past 31 bits."""
    return (lambda v: f"INT64_C({v})") if _bus_type(width) == "int64_t" else str


def _interval(edges, k: int) -> str:
    """Bin k of an input as the cell comments write it: half-open, the last bin closed."""
    return f"[{edges[k]:g}, {edges[k + 1]:g}{']' if k + 2 == len(edges) else ')'}"


def _doc(module: Module) -> list[str]:
    """The module's doc lines, the pipeline's latency replaced by what a call of the C does, then the MISRA
    C:2012 deviations."""
    lines = [
        _comment(line)
        if not line.startswith("latency:")
        else "/* one decision per call: the Verilog's pipeline registers are computed in the same call */"
        for line in module.doc
    ]
    lines.append(
        "/* MISRA C:2012: certfsm export-c --check runs cppcheck's misra addon on the header and the "
        "source and accepts these deviations, each justified, and nothing else: */"
    )
    return lines + [
        _comment(f"deviation: Rule {d.rule}: {d.reason.replace('NAME_', module.name + '_')}") for d in MISRA_DEVIATIONS
    ]


def reason_macro(reason: Reason) -> str:
    """The header's name of a reason code: ``CERTFSM_REASON_`` and the `Reason` member's name."""
    return f"CERTFSM_REASON_{reason.name}"


def token_macros(machine: Machine) -> tuple[str, ...]:
    """The header's name of each token's code, by output index: ``CERTFSM_TOKEN_`` and the name in capitals,
    every character that C does not allow in a name made ``_``.

    Raises SpecError naming both tokens when two names give the same C name (or names equal in their first 63
    characters, all that C99 promises to tell apart).
    """
    names = tuple("CERTFSM_TOKEN_" + re.sub(r"[^0-9A-Za-z_]", "_", token).upper() for token in machine.tokens)
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        other = seen.setdefault(name[:_C_NAME_LENGTH], index)
        if other != index:
            raise SpecError(
                f"tokens {machine.tokens[other]!r} and {machine.tokens[index]!r} both become the C name "
                f"{name[:_C_NAME_LENGTH]} in the exported header; rename one of them in the spec's outputs"
            )
    return names


def _code_lines(machine: Machine) -> list[str]:
    """The header's token and reason constants, each with what it means."""
    params = machine.params
    lines = [
        "/* Token codes: token_code and override_code carry these 4-bit codes (the artifact's codes). */",
    ]
    for index, (macro, code) in enumerate(zip(token_macros(machine), params.codes)):
        facts = [f"token {machine.tokens[index]}, output index {index}"]
        facts += ["the conservative token"] if index == params.conservative else []
        facts += ["overridable"] if index in params.overridable else []
        lines.append(f"#define {macro} {code}u  {_comment('; '.join(facts))}")
    lines += [
        "",
        "/* Reason codes: reason_code says why a call emitted token_code (certfsm.machine.Reason): the first rule "
        "that applies decides, in the order fallback, legality, override, table. After a reset it is 0 with "
        "out_valid 0. */",
    ]
    lines += [f"#define {reason_macro(r)} {int(r)}u  {_comment(REASON_MEANINGS[r])}" for r in Reason]
    return lines


def _word_type(width: int) -> str:
    return "uint8_t" if width <= 8 else "uint16_t" if width <= 16 else "uint32_t"


class _Printer:
    """Prints a `Module` as MISRA C:2012 minded C99.

    Every value is an unsigned ``uint32_t`` (buses excepted: ``int32_t``
    or ``int64_t``) and every condition essentially Boolean: a signal used
    as a condition is compared with ``0u``, a condition used as a value
    becomes ``1u`` or ``0u`` through ``?:``, every constant has its ``u``,
    every body its braces, every ``if ... else if`` chain its ``else``.
    """

    def __init__(self, hardware: Hardware) -> None:
        self.machine = hardware.machine
        self.module = module = hardware.module
        # The module's reason constants: the source reads them from the header, under these names.
        self.header_names = {f"REASON_{r.name}": reason_macro(r) for r in Reason}
        self.token_code_names = dict(zip(self.machine.params.codes, token_macros(self.machine)))
        self.outputs = {p.name for p in module.ports if p.direction == "output"}
        self.inputs = [p for p in module.ports if p.direction == "input" and p.name not in ("clk", "rst")]
        self.buses = {bank.bus.name for bank in module.body if isinstance(bank, ComparatorBank)}

    def expression(self, expr) -> str:
        """The C text of an expression as an unsigned value (a condition gives 1u or 0u)."""
        if isinstance(expr, Const):
            return f"{expr.value}u"
        if isinstance(expr, Ref):
            return self.header_names.get(expr.name, expr.name)
        if not isinstance(expr, Op):
            raise TypeError(f"not an expression: {expr!r}")
        if expr.op in _BOOLEAN:
            return f"({self.condition(expr)} ? 1u : 0u)"
        args = [self.expression(a) for a in expr.args]
        if expr.op == "?:":
            return f"({self.condition(expr.args[0])} ? {args[1]} : {args[2]})"
        if expr.op == "[]":
            return f"(({args[0]} >> {args[1]}) & 1u)"
        if expr.op == "zext":
            return args[0]
        if expr.op in ("+", "-", "*"):
            return f"(({args[0]} {expr.op} {args[1]}) & {_mask(expr.width)})"
        raise TypeError(f"no C for the operator {expr.op!r}")

    def condition(self, expr) -> str:
        """The C text of an expression as an essentially Boolean condition, always in parentheses."""
        if isinstance(expr, Op) and expr.op in _COMPARISONS:
            return f"({self.expression(expr.args[0])} {expr.op} {self.expression(expr.args[1])})"
        if isinstance(expr, Op) and expr.op in ("&&", "||"):
            return f"({self.condition(expr.args[0])} {expr.op} {self.condition(expr.args[1])})"
        if isinstance(expr, Op) and expr.op == "!":
            inner = expr.args[0]
            if isinstance(inner, Op) and inner.op in _BOOLEAN:
                return f"(!{self.condition(inner)})"
            return f"({self.expression(inner)} == 0u)"
        return f"({self.expression(expr)} != 0u)"

    # ------------------------------------------------------------ header

    def header(self) -> str:
        name, guard = self.module.name, f"{self.module.name.upper()}_H"
        state = [f"{_INDENT}uint32_t {r};" for r in STATE_REGISTERS]
        inputs = [
            f"{_INDENT}{_bus_type(p.width) if p.name in self.buses else 'uint32_t'} {p.name};  "
            + _comment(_C_DOCS.get(p.name, p.doc))
            for p in self.inputs
        ]
        outputs = [
            f"{_INDENT}uint32_t {p.name};  " + _comment(_C_DOCS.get(p.name, p.doc))
            for p in self.module.ports
            if p.direction == "output"
        ]
        lines = [
            *_doc(self.module),
            "/* Written by certfsm export-c from the artifact named above: the exported Verilog module's "
            "structure as C99, one decision per call. */",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            "#include <stdint.h>",
            "",
            *_code_lines(self.machine),
            "",
            "/* The machine's state registers (certfsm.machine.State; candidate is 0 when candidate_valid is 0). */",
            "typedef struct {",
            *state,
            f"}} {name}_state;",
            "",
            "/* One reading: each bus is the integer v meaning v * 2^-frac_bits. */",
            "typedef struct {",
            *inputs,
            f"}} {name}_input;",
            "",
            "/* The decision; left unchanged by a call with in_valid 0 (out_valid then 0). */",
            "typedef struct {",
            *outputs,
            f"}} {name}_output;",
            "",
            "/* The initial state and the reset outputs. */",
            f"void {name}_reset({name}_state *state, {name}_output *out);",
            "/* One decision: the next state and the outputs for one reading. */",
            f"void {name}_step({name}_state *state, const {name}_input *in, {name}_output *out);",
            "",
            f"#endif /* {guard} */",
            "",
        ]
        return "\n".join(lines)

    # ------------------------------------------------------------ source

    def source(self) -> str:
        name = self.module.name
        lines = [*_doc(self.module), f'#include "{name}.h"', ""]
        for constant in self.module.constants:
            if constant.name in self.header_names:
                continue
            doc = f"  {_comment(constant.doc)}" if constant.doc else ""
            lines.append(f"#define {constant.name} {constant.value}u{doc}")
        resets = [
            n for n in self.module.body if isinstance(n, Register) and n.name in (*STATE_REGISTERS, *self.outputs)
        ]
        lines += ["", f"void {name}_reset({name}_state *state, {name}_output *out)", "{"]
        lines += [f"{_INDENT}{self._target(r)} = {self._value(r.name, r.reset)};" for r in resets]
        lines += ["}", "", f"void {name}_step({name}_state *state, const {name}_input *in, {name}_output *out)", "{"]
        body = []
        for node in self.module.body:
            if isinstance(node, Rom):
                # At block scope (MISRA C:2012 Rule 8.9): only the step reads the ROMs; static, so built once.
                body += [
                    _comment(node.doc),
                    f"static const {_word_type(node.width)} {node.name}[{len(node.entries)}] = {{",
                ]
                body += [f"{_INDENT}{entry.value}u,  {_comment(entry.comment)}" for entry in node.entries]
                body += ["};"]
        body += [
            f"const {_bus_type(p.width) if p.name in self.buses else 'uint32_t'} {p.name} = in->{p.name};"
            for p in self.inputs
        ]
        body += [f"const uint32_t {r} = state->{r};" for r in STATE_REGISTERS]
        loads = []
        for node in self.module.body:
            if isinstance(node, ComparatorBank):
                body += self._bank(node)
            elif isinstance(node, Wire):
                body += [_comment(node.doc), f"const uint32_t {node.name} = {self.expression(node.expr)};"]
            elif isinstance(node, SplitTest):
                literal = _bus_literal(node.bus.width)
                body += [
                    _comment(node.doc),
                    f"const uint32_t {node.name} = (({node.bus.name} >= {literal(node.threshold)}) ? 1u : 0u);",
                ]
            elif isinstance(node, Select):
                tests = [test for test in self.module.body if isinstance(test, SplitTest)]
                body += print_tree_lookup(node, tests, self.machine.n_cells, _INDENT, _comment, _word_type)
            elif isinstance(node, Rom):
                address, size = node.address.name, len(node.entries)
                body += [
                    _comment(f"{node.word}: {node.name}[{address}], and past the table ({node.default.comment})"),
                    f"const uint32_t {node.word} = (({address} < {size}u) ? {node.name}[{address}] : "
                    f"{node.default.value}u);",
                ]
            elif isinstance(node, Lookup):
                body += self._lookup(node)
            elif isinstance(node, Decision):
                body += self._decision(node)
            elif isinstance(node, Register):
                if node.name in STATE_REGISTERS or node.name in self.outputs:
                    loads.append(node)
                else:
                    body += [
                        _comment(f"{node.name}: {node.doc or 'sampled with the reading'}"),
                        f"const uint32_t {node.name} = {self.expression(node.next)};",
                    ]
        body.append("/* the registers load: the state and the outputs */")
        body += self._loads(loads)
        lines += [_INDENT + line if line else "" for line in body]
        lines += ["}", ""]
        return "\n".join(lines)

    def _target(self, register: Register) -> str:
        return f"state->{register.name}" if register.name in STATE_REGISTERS else f"out->{register.name}"

    def _loads(self, registers: list[Register]) -> list[str]:
        """The register loads, those in a row under the same enable in one ``if``."""
        lines: list[str] = []
        enable = None
        for register in registers:
            load = f"{self._target(register)} = {self.expression(register.next)};"
            if register.enable is not None and register.enable == enable:
                lines.insert(len(lines) - 1, _INDENT + load)
                continue
            enable = register.enable
            lines += [load] if enable is None else [f"if {self.condition(enable)} {{", _INDENT + load, "}"]
        return lines

    def _bank(self, bank: ComparatorBank) -> list[str]:
        bus = bank.bus.name
        literal = _bus_literal(bank.bus.width)
        lines = [
            _comment(
                f"{bank.input_name}: v means v * 2^-{bank.frac_bits}; threshold = ceil(edge * "
                f"2^{bank.frac_bits}); envelope {bank.low} .. {bank.high}"
            ),
            f"const uint32_t {bank.in_envelope.name} = ((({bus} >= {literal(bank.low)}) && "
            f"({bus} <= {literal(bank.high)})) ? 1u : 0u);",
            f"uint32_t {bank.bin.name};",
        ]
        for k in range(len(bank.thresholds), 0, -1):
            keyword = "if" if k == len(bank.thresholds) else "} else if"
            bound = _comment(_interval(bank.edges, k))
            lines += [
                f"{keyword} ({bus} >= {literal(bank.thresholds[k - 1])}) {{  {bound}",
                f"{_INDENT}{bank.bin.name} = {k}u;",
            ]
        if bank.thresholds:
            lines += [f"}} else {{  {_comment(_interval(bank.edges, 0))}", f"{_INDENT}{bank.bin.name} = 0u;", "}"]
        else:
            lines.append(f"{bank.bin.name} = 0u;  {_comment(_interval(bank.edges, 0))}")
        return lines

    def _value(self, signal: str, value: int) -> str:
        """A constant that `signal` takes: a token code by its header name, any other value as a number."""
        if signal in _TOKEN_CODE_SIGNALS and value in self.token_code_names:
            return self.token_code_names[value]
        return f"{value}u"

    def _lookup(self, lookup: Lookup) -> list[str]:
        selector = lookup.selector.name
        lines = [_comment(lookup.doc), f"uint32_t {lookup.name};", f"switch ({selector}) {{"]
        for key, value, comment in lookup.cases:
            case = self.token_code_names[key] if selector in _TOKEN_CODE_SELECTORS else f"{key}u"
            lines.append(f"case {case}: {lookup.name} = {self._value(lookup.name, value)}; break;  {_comment(comment)}")
        lines += [f"default: {lookup.name} = {self._value(lookup.name, lookup.default)}; break;", "}"]
        return lines

    def _decision(self, decision: Decision) -> list[str]:
        lines = [_comment(decision.doc), *(f"uint32_t {name};" for name, _ in decision.targets)]
        for index, rule in enumerate(decision.rules):
            keyword = "if" if index == 0 else "} else if"
            lines.append(f"{keyword} {self.condition(rule.guard)} {{  {_comment(rule.title)}")
            lines += [f"{_INDENT}{name} = {self.expression(value)};" for name, value in rule.values]
        lines.append(f"}} else {{  {_comment(decision.otherwise.title)}")
        lines += [f"{_INDENT}{name} = {self.expression(value)};" for name, value in decision.otherwise.values]
        lines.append("}")
        return lines


def print_c(hardware: Hardware) -> tuple[str, str]:
    """(header, source) of the hardware's module as dependency-free C99, each ending in a newline; the header's
    token constants come from its machine. Raises SpecError when two token names give one C name."""
    printer = _Printer(hardware)
    return printer.header(), printer.source()
