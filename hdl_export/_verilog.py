"""The Verilog printer: one walk over a `Module` gives one synthesizable Verilog-2005 module.

All Verilog of the module is written here and nowhere else. The text is
meant for review: declarations first (Verilog wants a name declared before
it is used, and the state registers and the rule chain use each other),
then one commented block per node in the structure's order. A ROM is a
``case`` on its address in an ``always @*`` block, one arm per cell that
names the cell's bounds and status (a reviewer finds a cell's token by
searching for ``cell 1234:``) and a ``default`` arm for the addresses past
the table; the register that loads the word makes the read synchronous,
and yosys turns the case back into a memory (``proc_rom``) and the two
into block RAM. A case, not an ``initial`` block filling an array: yosys
reads and lowers the initial block's one statement per word over ten
times slower, in each of its runs. Nothing in the text depends on paths
or time, so the same machine always prints the same bytes.
"""

from __future__ import annotations

from ._netlist import ComparatorBank, Const, Decision, Lookup, Module, Op, Ref, Register, Rom, Select, SplitTest, Wire
from ._vectors import Layout

_INDENT = "    "


def _range(width: int, indexed: bool = False) -> str:
    """The declared range; a one-bit signal that is indexed (a mask over one token) still needs [0:0]."""
    return f"[{width - 1}:0] " if width > 1 or indexed else ""


def _indexed(module: Module) -> frozenset[str]:
    """Names that appear as the vector of a ``[]`` (a bit select) anywhere in the module."""
    names, pending = set(), []
    for node in module.body:
        if isinstance(node, Wire):
            pending.append(node.expr)
        elif isinstance(node, Register):
            pending += [node.next] + ([node.enable] if node.enable is not None else [])
        elif isinstance(node, Decision):
            for rule in (*node.rules, node.otherwise):
                pending += [rule.guard, *(value for _, value in rule.values)]
    while pending:
        expr = pending.pop()
        if isinstance(expr, Op):
            if expr.op == "[]" and isinstance(expr.args[0], Ref):
                names.add(expr.args[0].name)
            pending += list(expr.args)
    return frozenset(names)


def _literal(value: int, width: int) -> str:
    return f"{width}'d{value}"


def expression(expr) -> str:
    """The Verilog text of an expression; every binary operator is parenthesised, so precedence never matters."""
    if isinstance(expr, Const):
        return _literal(expr.value, expr.width)
    if isinstance(expr, Ref):
        return expr.name
    if not isinstance(expr, Op):
        raise TypeError(f"not an expression: {expr!r}")
    args = expr.args
    if expr.op == "!":
        return f"!{expression(args[0])}"
    if expr.op == "?:":
        return f"({expression(args[0])} ? {expression(args[1])} : {expression(args[2])})"
    if expr.op == "[]":
        return f"{expression(args[0])}[{expression(args[1])}]"
    if expr.op == "zext":
        return f"{{{_literal(0, expr.width - args[0].width)}, {expression(args[0])}}}"
    return f"({expression(args[0])} {expr.op} {expression(args[1])})"


def _bus_literal(value: int, bank: ComparatorBank | SplitTest) -> str:
    width = bank.bus.width
    if bank.signed:
        return f"-{width}'sd{-value}" if value < 0 else f"{width}'sd{value}"
    return _literal(value, width)


def _show(value: float) -> str:
    return f"{value:g}"


def _declarations(module: Module, indexed: frozenset[str]) -> list[str]:
    lines = []
    outputs = {p.name for p in module.ports if p.direction == "output"}
    for node in module.body:
        if isinstance(node, ComparatorBank):
            kind = "reg " if node.always_met < len(node.thresholds) else "wire"
            lines.append(f"{kind} {_range(node.bin.width)}{node.bin.name};")
            lines.append(f"wire {node.in_envelope.name};")
        elif isinstance(node, Wire):
            lines.append(f"wire {_range(node.width)}{node.name};")
        elif isinstance(node, SplitTest):
            lines.append(f"wire {node.name};")
        elif isinstance(node, Select):
            lines.append(f"reg  {_range(node.width)}{node.name};")
        elif isinstance(node, Rom):
            lines.append(f"reg  {_range(node.width, node.word in indexed)}{node.word};")
        elif isinstance(node, Lookup):
            lines.append(f"reg  {_range(node.width)}{node.name};")
        elif isinstance(node, Register) and node.name not in outputs:
            lines.append(f"reg  {_range(node.width, node.name in indexed)}{node.name};")
        elif isinstance(node, Decision):
            lines += [f"reg  {_range(width)}{name};" for name, width in node.targets]
    return lines


def _bank(bank: ComparatorBank) -> list[str]:
    bus, unit = bank.bus.name, f" {bank.unit}" if bank.unit else ""
    lines = [
        f"// {bank.input_name}{unit}: bus value v means v * 2^-{bank.frac_bits}; threshold = ceil(edge * "
        f"2^{bank.frac_bits}), so v >= threshold exactly when v * 2^-{bank.frac_bits} >= edge",
        f"// envelope [{_show(bank.edges[0])}, {_show(bank.edges[-1])}]{unit} = "
        f"{bank.low} .. {bank.high}; {len(bank.edges) - 1} bins",
    ]
    checks = []
    if bank.signed or bank.low > 0:
        checks.append(f"({bus} >= {_bus_literal(bank.low, bank)})")
    checks.append(f"({bus} <= {_bus_literal(bank.high, bank)})")
    lines.append(f"assign {bank.in_envelope.name} = {' && '.join(checks)};")
    width = bank.bin.width
    floor = bank.always_met
    last = len(bank.edges) - 2

    def bounds(k):
        return f"[{_show(bank.edges[k])}, {_show(bank.edges[k + 1])}{']' if k == last else ')'}"

    if floor == len(bank.thresholds):
        return lines + [f"assign {bank.bin.name} = {_literal(floor, width)};  // every bus value: {bounds(floor)}"]
    lines.append("always @* begin")
    for k in range(len(bank.thresholds), floor, -1):
        test = f"{bus} >= {_bus_literal(bank.thresholds[k - 1], bank)}"
        keyword = "if" if k == len(bank.thresholds) else "else if"
        lines.append(f"{_INDENT}{keyword} ({test}) {bank.bin.name} = {_literal(k, width)};  // {bounds(k)}")
    unreachable = f"; {', '.join(bounds(k) for k in range(floor))} hold no bus value" if floor else ""
    lines.append(f"{_INDENT}else {bank.bin.name} = {_literal(floor, width)};  // {bounds(floor)}{unreachable}")
    return lines + ["end"]


def _rom(rom: Rom) -> list[str]:
    """The ROM as one case arm per address, its labels aligned, then the default arm for the addresses beyond."""
    labels = [f"{_literal(address, rom.address.width)}:" for address in range(len(rom.entries))]
    width = max(len(label) for label in [*labels, "default:"])

    def arm(label: str, entry) -> str:
        value = f"{rom.width}'b{entry.value:0{rom.width}b}" if rom.is_bit_mask else _literal(entry.value, rom.width)
        return f"{_INDENT * 2}{label:<{width}} {rom.word} = {value};  // {entry.comment}"

    lines = [f"// {rom.name}: {rom.doc}", "always @* begin", f"{_INDENT}case ({rom.address.name})"]
    lines += [arm(label, entry) for label, entry in zip(labels, rom.entries)]
    lines += [arm("default:", rom.default), f"{_INDENT}endcase", "end"]
    return lines


def _lookup(lookup: Lookup) -> list[str]:
    lines = [f"// {lookup.doc}", "always @* begin", f"{_INDENT}case ({lookup.selector.name})"]
    for key, value, comment in lookup.cases:
        lines.append(
            f"{_INDENT * 2}{_literal(key, lookup.selector.width)}: {lookup.name} = "
            f"{_literal(value, lookup.width)};  // {comment}"
        )
    lines.append(f"{_INDENT * 2}default: {lookup.name} = {_literal(lookup.default, lookup.width)};")
    lines += [f"{_INDENT}endcase", "end"]
    return lines


def _select(select: Select) -> list[str]:
    """A parallel case: one arm per key with its expression (a refined cell's tree), then the default arm."""
    lines = [f"// {select.doc}", "always @* begin", f"{_INDENT}case ({select.selector.name})"]
    for key, value, comment in select.cases:
        lines.append(
            f"{_INDENT * 2}{_literal(key, select.selector.width)}: {select.name} = {expression(value)};  // {comment}"
        )
    lines.append(f"{_INDENT * 2}default: {select.name} = {expression(select.default)};")
    return lines + [f"{_INDENT}endcase", "end"]


def _registers(group: list[Register]) -> list[str]:
    """One always block for consecutive registers that share their reset and enable."""
    first = group[0]
    lines = [f"// {r.name}: {r.doc}" for r in group if r.doc]
    lines.append("always @(posedge clk) begin")
    loads = [f"{r.name} <= {expression(r.next)};" for r in group]
    body = (
        loads
        if first.enable is None
        else [f"if ({expression(first.enable)}) begin", *[_INDENT + line for line in loads], "end"]
    )
    if first.reset is None:
        lines += [_INDENT + line for line in body]
    else:
        lines.append(f"{_INDENT}if (rst) begin")
        lines += [f"{_INDENT * 2}{r.name} <= {_literal(r.reset, r.width)};" for r in group]
        if first.enable is None:
            lines.append(f"{_INDENT}end else begin")
            lines += [_INDENT * 2 + line for line in loads]
            lines.append(f"{_INDENT}end")
        else:
            lines.append(f"{_INDENT}end else if ({expression(first.enable)}) begin")
            lines += [_INDENT * 2 + line for line in loads]
            lines.append(f"{_INDENT}end")
    lines.append("end")
    return lines


def _decision(decision: Decision) -> list[str]:
    lines = [f"// {decision.doc}", "always @* begin"]
    for index, rule in enumerate(decision.rules):
        keyword = "if" if index == 0 else "end else if"
        lines.append(f"{_INDENT}{keyword} ({expression(rule.guard)}) begin  // {rule.title}")
        lines += [f"{_INDENT * 2}{name} = {expression(value)};" for name, value in rule.values]
    lines.append(f"{_INDENT}end else begin  // {decision.otherwise.title}")
    lines += [f"{_INDENT * 2}{name} = {expression(value)};" for name, value in decision.otherwise.values]
    lines += [f"{_INDENT}end", "end"]
    return lines


def _same_kind(a: Register, b: Register) -> bool:
    return (a.reset is None) == (b.reset is None) and a.enable == b.enable


def print_verilog(module: Module) -> str:
    """The module as Verilog-2005 text, ending in a newline."""
    lines = [f"// {line}" for line in module.doc]
    lines += [
        "// Written by certfsm export-verilog from the artifact named above; every ROM line names its cell.",
        "",
        "`default_nettype none",
        "",
        f"module {module.name} (",
    ]
    for index, port in enumerate(module.ports):
        kind = "reg " if port.direction == "output" else "wire"
        signed = "signed " if port.signed else ""
        comma = "," if index < len(module.ports) - 1 else ""
        declaration = f"{port.direction:<6} {kind} {signed}{_range(port.width)}{port.name}{comma}"
        lines.append(f"{_INDENT}{declaration:<44}// {port.doc}")
    lines.append(");")
    body = []
    indexed = _indexed(module)
    for constant in module.constants:
        value = _literal(constant.value, constant.width)
        text = f"localparam {_range(constant.width, constant.name in indexed)}{constant.name} = {value};"
        body.append(f"{text:<52}// {constant.doc}" if constant.doc else text)
    body += ["", *_declarations(module, indexed)]
    nodes = list(module.body)
    index = 0
    while index < len(nodes):
        node = nodes[index]
        body.append("")
        if isinstance(node, ComparatorBank):
            body += _bank(node)
        elif isinstance(node, Wire):
            body.append(f"// {node.doc}")
            body.append(f"assign {node.name} = {expression(node.expr)};")
        elif isinstance(node, SplitTest):
            body.append(f"// {node.doc}")
            body.append(f"assign {node.name} = ({node.bus.name} >= {_bus_literal(node.threshold, node)});")
        elif isinstance(node, Select):
            body += _select(node)
        elif isinstance(node, Rom):
            body += _rom(node)
        elif isinstance(node, Lookup):
            body += _lookup(node)
        elif isinstance(node, Decision):
            body += _decision(node)
        elif isinstance(node, Register):
            group = [node]
            while (
                index + 1 < len(nodes) and isinstance(nodes[index + 1], Register) and _same_kind(nodes[index + 1], node)
            ):
                index += 1
                group.append(nodes[index])
            body += _registers(group)
        index += 1
    lines += [(_INDENT + line) if line else "" for line in body]
    lines += ["endmodule", "", "`default_nettype wire", ""]
    return "\n".join(lines)


def print_testbench(
    module: Module,
    stimulus: Layout,
    expected: Layout,
    steps: int,
    stimulus_file: str = "stimulus.hex",
    expected_file: str = "expected.hex",
) -> str:
    """A self-checking test bench: drive one stimulus word per rising edge, compare the ports and state after it.

    Outputs are read from the ports; the state registers through the
    instance (`_hardware.STATE_REGISTERS`), so a wrong state shows at once
    rather than cycles later. Each mismatch prints one ``MISMATCH`` line
    (the first ten) and the run ends with ``RESULT steps=N mismatches=M``.
    """
    ports = {port.name: port for port in module.ports}
    observed = [name if name in ports else f"dut.{name}" for name, _ in expected.fields]
    lines = [
        "`timescale 1ns / 1ps",
        "`default_nettype none",
        "",
        f"// Self-checking test bench for {module.name}: {steps} rising edges, expected values from the Python "
        "reference (certfsm.machine).",
        f"module {module.name}_tb;",
    ]
    body = [
        f"localparam integer STEPS = {steps};",
        f"reg [{stimulus.width - 1}:0] stimulus [0:STEPS - 1];",
        f"reg [{expected.width - 1}:0] expected [0:STEPS - 1];",
        f"reg [{expected.width - 1}:0] seen;",
        "reg clk;",
    ]
    for name, width in stimulus.fields:
        signed = "signed " if ports[name].signed else ""
        body.append(f"reg {signed}{_range(width)}{name};")
    outputs = [p for p in module.ports if p.direction == "output"]
    body += [f"wire {_range(p.width)}{p.name};" for p in outputs]
    connections = [f".{p.name}({p.name})" for p in module.ports]
    body.append(f"{module.name} dut ({', '.join(connections)});")
    body += [
        "integer step;",
        "integer mismatches;",
        "",
        "initial begin",
        f'{_INDENT}$readmemh("{stimulus_file}", stimulus);',
        f'{_INDENT}$readmemh("{expected_file}", expected);',
        f"{_INDENT}clk = 1'b0;",
        f"{_INDENT}mismatches = 0;",
        f"{_INDENT}for (step = 0; step < STEPS; step = step + 1) begin",
        f"{_INDENT * 2}{{{', '.join(name for name, _ in stimulus.fields)}}} = stimulus[step];",
        f"{_INDENT * 2}#1 clk = 1'b1;",
        f"{_INDENT * 2}#1 seen = {{{', '.join(observed)}}};",
        f"{_INDENT * 2}if (seen !== expected[step]) begin",
        f"{_INDENT * 3}mismatches = mismatches + 1;",
        f'{_INDENT * 3}if (mismatches <= 10) $display("MISMATCH step=%0d seen=%h expected=%h", step, seen, '
        "expected[step]);",
        f"{_INDENT * 2}end",
        f"{_INDENT * 2}clk = 1'b0;",
        f"{_INDENT}end",
        f'{_INDENT}$display("RESULT steps=%0d mismatches=%0d", STEPS, mismatches);',
        f"{_INDENT}$finish;",
        "end",
    ]
    lines += [(_INDENT + line) if line else "" for line in body]
    lines += ["endmodule", "", "`default_nettype wire", ""]
    return "\n".join(lines)
