"""The deciding edge of the hardware: the state registers, the facts the rules test, the rule chain and the outputs.

On the edge after a reading is sampled (the port contract in
`_hardware.py`), the rule chain performs one `certfsm.machine.step` in the
machine's own priority order and loads the state registers
(`certfsm.machine.State`) and the registered outputs from its targets.
`_hardware.hardware_of` places these nodes after the comparator banks,
the ROMs and the pipeline registers; the printers turn them into text
and the equivalence proof's claims follow the chain's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from certfsm.machine import Machine, Reason

from ._netlist import Const, Decision, Lookup, Op, Ref, Register, Rule, Wire, all_of, eq, mux, not_, op

if TYPE_CHECKING:
    from ._hardware import _Widths


def reason_ref(r: Reason) -> Ref:
    """The named constant of reason `r`, so that the Verilog and the C say which reason, not which number."""
    return Ref(f"REASON_{r.name}", 4)


def state_registers(machine: Machine, w: _Widths) -> list[Register]:
    """The registers of `certfsm.machine.State` (`STATE_REGISTERS`), loaded from the rule chain on a valid edge."""
    state_enable = Ref("valid_q", 1)
    return [
        Register(
            "current",
            w.token,
            Ref("next_current", w.token),
            machine.params.conservative,
            state_enable,
            "the current token",
        ),
        Register("candidate_valid", 1, Ref("next_candidate_valid", 1), 0, state_enable, "a candidate is counted"),
        Register("candidate", w.token, Ref("next_candidate", w.token), 0, state_enable, "the candidate token"),
        Register(
            "count", w.count, Ref("next_count", w.count), 0, state_enable, "cycles the candidate has been proposed"
        ),
        Register(
            "cooldown",
            w.cooldown,
            Ref("next_cooldown", w.cooldown),
            0,
            state_enable,
            "cycles until a switch may happen",
        ),
    ]


def rule_inputs(machine: Machine, w: _Widths) -> list[Lookup | Wire]:
    """The named facts the rules test (the override's token, the counted-down cooldown, confirmation).

    Why named wires and not one expression per rule: each fact appears once in the Verilog and the C, with a
    comment, and the rule chain reads like `certfsm.machine.step`.
    """
    params, n, dw, nw = machine.params, w.mask, w.cooldown, w.count
    cooldown, count = Ref("cooldown", dw), Ref("count", nw)
    override_token, allowed_q = Ref("override_token", w.token), Ref("allowed_q", n)
    overridable_token = all_of(Ref("override_is_token", 1), op("[]", Ref("OVERRIDABLE", n), override_token))
    return [
        Lookup(
            "override_token",
            w.token,
            Ref("override_code_q", 4),
            tuple((params.codes[t], t, machine.tokens[t]) for t in range(n)),
            0,
            "the output index whose code was requested",
        ),
        Lookup(
            "override_is_token",
            1,
            Ref("override_code_q", 4),
            tuple((params.codes[t], 1, machine.tokens[t]) for t in range(n)),
            0,
            "the requested code is some token's code",
        ),
        Wire(
            "counted_down",
            dw,
            mux(eq(cooldown, Const(0, dw)), Const(0, dw), op("-", cooldown, Const(1, dw), width=dw)),
            "the cooldown counted down by one, never below 0",
        ),
        Wire("cooldown_expired", 1, eq(Ref("counted_down", dw), Const(0, dw)), "a switch may happen this cycle"),
        Wire(
            "current_allowed",
            1,
            op("[]", allowed_q, Ref("current", w.token)),
            "the current token is allowed in the cell",
        ),
        Wire(
            "override_obeyable",
            1,
            all_of(Ref("override_request_q", 1), overridable_token, op("[]", allowed_q, override_token)),
            "an override of an overridable token allowed in the cell",
        ),
        Wire(
            "override_refusal",
            4,
            mux(
                overridable_token,
                reason_ref(Reason.OVERRIDE_REFUSED_FORBIDDEN),
                reason_ref(Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE),
            ),
            "the reason reported when a requested override is not obeyed",
        ),
        Wire(
            "proposal_count",
            nw,
            mux(
                all_of(Ref("candidate_valid", 1), eq(Ref("candidate", w.token), Ref("proposal_q", w.token))),
                mux(
                    op(">=", count, Ref("CONFIRM_CYCLES", nw)),
                    Ref("CONFIRM_CYCLES", nw),
                    op("+", count, Const(1, nw), width=nw),
                ),
                Const(1, nw),
            ),
            "how many consecutive cycles the proposal has been seen, saturating at CONFIRM_CYCLES",
        ),
        Wire(
            "confirmed", 1, op(">=", Ref("proposal_count", nw), Ref("CONFIRM_CYCLES", nw)), "the proposal is confirmed"
        ),
    ]


def rule_chain(w: _Widths) -> Decision:
    """One step of `certfsm.machine.step` as a priority chain: the first rule whose guard holds sets every target.

    Why a chain in the machine's own order (numbered as in `certfsm.machine`'s docstring): a reviewer checks
    it rule by rule against the Python, and the equivalence proof's claims follow the same shape.
    """
    tw, nw, dw = w.token, w.count, w.cooldown
    current, conservative = Ref("current", tw), Ref("CONSERVATIVE", tw)
    proposal_q, proposal_count = Ref("proposal_q", tw), Ref("proposal_count", nw)
    override_token, obeyable = Ref("override_token", tw), Ref("override_obeyable", 1)
    counted_down, cooldown_expired = Ref("counted_down", dw), Ref("cooldown_expired", 1)
    confirmed, restart = Ref("confirmed", 1), Ref("COOLDOWN_CYCLES", dw)
    targets = (
        ("next_current", tw),
        ("next_candidate_valid", 1),
        ("next_candidate", tw),
        ("next_count", nw),
        ("next_cooldown", dw),
        ("next_reason", 4),
    )

    def values(new_current, new_cooldown, why, candidate_value=None, count_value=None):
        return (
            ("next_current", new_current),
            ("next_candidate_valid", Const(0 if candidate_value is None else 1, 1)),
            ("next_candidate", Const(0, tw) if candidate_value is None else candidate_value),
            ("next_count", Const(0, nw) if count_value is None else count_value),
            ("next_cooldown", new_cooldown),
            ("next_reason", why),
        )

    def table_reason(r: Reason) -> Op:
        return mux(Ref("override_request_q", 1), Ref("override_refusal", 4), reason_ref(r))

    rules = (
        Rule(
            "1. out of envelope: the conservative token, cooldown restarts",
            not_(Ref("in_envelope_q", 1)),
            values(conservative, restart, reason_ref(Reason.FALLBACK_ENVELOPE)),
        ),
        Rule(
            "1. SLA violated: the conservative token, cooldown restarts",
            not_(Ref("sla_ok_q", 1)),
            values(conservative, restart, reason_ref(Reason.FALLBACK_SLA)),
        ),
        Rule(
            "2. current token forbidden in this cell: pre-empt to the conservative token",
            not_(Ref("current_allowed", 1)),
            values(conservative, restart, reason_ref(Reason.LEGALITY_PREEMPT)),
        ),
        Rule(
            "3. override of the current token: keep it",
            all_of(obeyable, eq(override_token, current)),
            values(current, counted_down, reason_ref(Reason.OVERRIDE)),
        ),
        Rule(
            "3. override to the conservative token, or with the cooldown expired: obey",
            all_of(obeyable, op("||", eq(override_token, conservative), cooldown_expired)),
            values(override_token, restart, reason_ref(Reason.OVERRIDE)),
        ),
        Rule(
            "3. override waits for the cooldown",
            obeyable,
            values(current, counted_down, reason_ref(Reason.OVERRIDE_WAITING)),
        ),
        Rule(
            "6. the table proposes the current token: keep it",
            eq(proposal_q, current),
            values(current, counted_down, table_reason(Reason.KEEP_CURRENT)),
        ),
        Rule(
            "4. the table proposes the conservative token: move down at once",
            eq(proposal_q, conservative),
            values(conservative, restart, table_reason(Reason.MOVE_DOWN)),
        ),
        Rule(
            "5. proposal confirmed and cooldown expired: switch",
            all_of(confirmed, cooldown_expired),
            values(proposal_q, restart, table_reason(Reason.SWITCH)),
        ),
        Rule(
            "5. proposal not yet confirmed: hold and count",
            not_(confirmed),
            values(current, counted_down, table_reason(Reason.HOLD_CONFIRMING), proposal_q, proposal_count),
        ),
    )
    otherwise = Rule(
        "5. confirmed, cooldown running: hold",
        Const(1, 1),
        values(current, counted_down, table_reason(Reason.HOLD_COOLDOWN), proposal_q, proposal_count),
    )
    return Decision(
        targets,
        rules,
        otherwise,
        "one step of certfsm.machine.step, tested in its order, the first rule that holds wins "
        "(numbers: the rules in certfsm.machine's docstring); "
        "a requested override that is not obeyed leaves the table path to decide and reports "
        "the refusal as the reason",
    )


def output_registers(machine: Machine, w: _Widths) -> list[Lookup | Register]:
    """The emitted token's code and the registered outputs, loaded on the same edge as the state.

    Why registered outputs with reset values: the port contract promises stable outputs between decisions
    and the conservative token's code after reset.
    """
    params, state_enable = machine.params, Ref("valid_q", 1)
    conservative_code = params.codes[params.conservative]
    return [
        Lookup(
            "next_token_code",
            4,
            Ref("next_current", w.token),
            tuple((t, params.codes[t], machine.tokens[t]) for t in range(w.mask)),
            conservative_code,
            "the code of the token emitted this cycle",
        ),
        Register("token_code", 4, Ref("next_token_code", 4), conservative_code, state_enable, ""),
        Register("reason_code", 4, Ref("next_reason", 4), 0, state_enable, ""),
        Register("cell_index", w.cell, Ref("cell_q", w.cell), (1 << w.cell) - 1, state_enable, ""),
        Register("out_valid", 1, Ref("valid_q", 1), 0, None, ""),
    ]
