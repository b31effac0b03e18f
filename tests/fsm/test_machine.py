"""The step function: one scenario per priority rule, then random sequences against a reference model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import SpecError
from certfsm import load_spec
from certfsm.fsm._explicit import alphabet, check_explicit, explore, free_rows, transition_violations
from certfsm.fsm._machine import MachineInput, replay
from certfsm.fsm._machine_proofs import invariant_holds
from certfsm.machine import NO_CANDIDATE, MachineParams, Reason, State, initial_state, step
from certfsm.fsm._explicit import initial_node, next_since

EXAMPLE = Path(__file__).resolve().parents[2] / "certfsm" / "examples" / "coadapt.spec.json"
KEEP, FAST, INT4, OFFLOAD = range(4)
P = MachineParams(
    n_tokens=4,
    conservative=KEEP,
    confirm_cycles=3,
    cooldown_cycles=4,
    overridable=frozenset({KEEP, OFFLOAD}),
    codes=(0, 1, 2, 3),
)
ALL = (True, True, True, True)


def row(*forbidden):
    return tuple(k not in forbidden for k in range(4))


def cell(proposal, allowed=ALL, sla_ok=True, override=None):
    return MachineInput(proposal, allowed, True, sla_ok, override)


def outside(sla_ok=True, override=None):
    return MachineInput(None, None, False, sla_ok, override)


def run(inputs, params=P):
    return [(s.output, s.reason) for s in replay(params, inputs).steps]


def switched_to(token, params=P):
    """Inputs that bring the machine from the initial state to `token` (confirm cycles, cooldown expired)."""
    return [cell(token)] * params.confirm_cycles


def test_reason_codes_are_stable():
    assert {r.name: int(r) for r in Reason} == {
        "KEEP_CURRENT": 0,
        "SWITCH": 1,
        "HOLD_CONFIRMING": 2,
        "HOLD_COOLDOWN": 3,
        "MOVE_DOWN": 4,
        "LEGALITY_PREEMPT": 5,
        "FALLBACK_ENVELOPE": 6,
        "FALLBACK_SLA": 7,
        "OVERRIDE": 8,
        "OVERRIDE_WAITING": 9,
        "OVERRIDE_REFUSED_NOT_OVERRIDABLE": 10,
        "OVERRIDE_REFUSED_FORBIDDEN": 11,
    }


def test_the_machine_starts_on_the_conservative_token_with_no_cooldown():
    assert initial_state(P) == State(KEEP, NO_CANDIDATE, 0, 0)
    assert run([cell(KEEP)]) == [(KEEP, Reason.KEEP_CURRENT)]


def test_a_new_token_needs_confirm_cycles_consecutive_proposals():
    trace = replay(P, [cell(FAST)] * 3)
    assert [(s.output, s.reason) for s in trace.steps] == [
        (KEEP, Reason.HOLD_CONFIRMING),
        (KEEP, Reason.HOLD_CONFIRMING),
        (FAST, Reason.SWITCH),
    ]
    assert [s.after for s in trace.steps] == [
        State(KEEP, FAST, 1, 0),
        State(KEEP, FAST, 2, 0),
        State(FAST, NO_CANDIDATE, 0, 4),
    ]


def test_the_count_restarts_when_the_proposal_changes():
    trace = replay(P, [cell(FAST), cell(FAST), cell(INT4), cell(FAST), cell(KEEP), cell(FAST)])
    assert [(s.after.candidate, s.after.count) for s in trace.steps] == [
        (FAST, 1),
        (FAST, 2),
        (INT4, 1),
        (FAST, 1),
        (NO_CANDIDATE, 0),
        (FAST, 1),
    ]
    assert all(s.output == KEEP for s in trace.steps)


def test_switches_wait_for_the_cooldown_and_are_exactly_cooldown_cycles_apart():
    outputs = run(switched_to(FAST) + [cell(INT4)] * 6)
    switches = [k for k, (_, reason) in enumerate(outputs) if reason == Reason.SWITCH]
    assert switches == [2, 6]
    assert [reason for _, reason in outputs[3:7]] == [
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_COOLDOWN,
        Reason.SWITCH,
    ]
    assert outputs[6][0] == INT4 and outputs[7] == (INT4, Reason.KEEP_CURRENT)


def test_a_move_down_to_the_conservative_token_is_immediate_and_restarts_the_cooldown():
    outputs = run(switched_to(FAST) + [cell(FAST)] * 5 + [cell(KEEP)] + [cell(FAST)] * 5)
    assert outputs[8] == (KEEP, Reason.MOVE_DOWN)
    assert [reason for _, reason in outputs[9:]] == [
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_COOLDOWN,
        Reason.SWITCH,
        Reason.KEEP_CURRENT,
    ]


@pytest.mark.parametrize(
    "fallback, reason",
    [
        (outside(), Reason.FALLBACK_ENVELOPE),
        (cell(FAST, sla_ok=False), Reason.FALLBACK_SLA),
        (outside(sla_ok=False), Reason.FALLBACK_ENVELOPE),
        (outside(override=OFFLOAD), Reason.FALLBACK_ENVELOPE),
        (cell(FAST, sla_ok=False, override=OFFLOAD), Reason.FALLBACK_SLA),
    ],
)
def test_fallback_emits_the_conservative_token_in_the_same_cycle(fallback, reason):
    trace = replay(P, switched_to(FAST) + [cell(FAST)] * 5 + [fallback])
    assert (trace.steps[-1].output, trace.steps[-1].reason) == (KEEP, reason)
    assert trace.steps[-1].after == State(KEEP, NO_CANDIDATE, 0, 4)


def test_fallback_also_restarts_the_cooldown_on_the_conservative_token():
    outputs = run([outside()] + [cell(FAST)] * 5)
    assert [reason for _, reason in outputs[1:]] == [
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_CONFIRMING,
        Reason.HOLD_COOLDOWN,
        Reason.SWITCH,
        Reason.KEEP_CURRENT,
    ]


def test_legality_preemption_beats_hysteresis_and_overrides():
    inputs = switched_to(INT4) + [cell(FAST, row(INT4), override=OFFLOAD)]
    trace = replay(P, inputs)
    assert trace.steps[-2].after.cooldown == 4  # the cooldown is running, yet the move is immediate
    assert (trace.steps[-1].output, trace.steps[-1].reason) == (KEEP, Reason.LEGALITY_PREEMPT)
    assert trace.steps[-1].after == State(KEEP, NO_CANDIDATE, 0, 4)


def test_an_override_to_the_conservative_token_is_immediate():
    outputs = run(switched_to(FAST) + [cell(FAST, override=KEEP)])
    assert outputs[-1] == (KEEP, Reason.OVERRIDE)


def test_an_override_to_another_token_waits_for_the_cooldown():
    trace = replay(P, switched_to(FAST) + [cell(FAST, override=OFFLOAD)] * 5)
    assert [(s.output, s.reason) for s in trace.steps[3:]] == [
        (FAST, Reason.OVERRIDE_WAITING),
        (FAST, Reason.OVERRIDE_WAITING),
        (FAST, Reason.OVERRIDE_WAITING),
        (OFFLOAD, Reason.OVERRIDE),
        (OFFLOAD, Reason.OVERRIDE),
    ]
    assert trace.steps[6].after.cooldown == 4 and trace.steps[7].after.cooldown == 3  # holding does not restart it


def test_an_override_needs_no_confirmation_and_clears_the_candidate():
    trace = replay(P, [cell(FAST), cell(FAST, override=OFFLOAD), cell(FAST)])
    assert [(s.output, s.reason) for s in trace.steps] == [
        (KEEP, Reason.HOLD_CONFIRMING),
        (OFFLOAD, Reason.OVERRIDE),
        (OFFLOAD, Reason.HOLD_CONFIRMING),
    ]
    assert trace.steps[2].after.count == 1


@pytest.mark.parametrize("override", [FAST, INT4, 4, -1, 99])
def test_an_override_that_is_not_overridable_is_refused_and_the_table_decides(override):
    outputs = run([cell(FAST, override=override)] * 3)
    assert outputs == [(KEEP, Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE)] * 2 + [
        (FAST, Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE)
    ]


def test_an_override_forbidden_in_the_cell_is_refused_and_the_table_decides():
    outputs = run([cell(FAST, row(OFFLOAD), override=OFFLOAD)] * 3 + [cell(FAST, override=OFFLOAD)])
    assert outputs == [(KEEP, Reason.OVERRIDE_REFUSED_FORBIDDEN)] * 2 + [
        (FAST, Reason.OVERRIDE_REFUSED_FORBIDDEN),
        (FAST, Reason.OVERRIDE_WAITING),
    ]


def test_an_override_of_the_current_token_keeps_it_without_restarting_the_cooldown():
    trace = replay(P, [cell(FAST, override=KEEP)] * 2)
    assert [(s.output, s.reason, s.after.cooldown) for s in trace.steps] == [(KEEP, Reason.OVERRIDE, 0)] * 2


def test_a_proposal_equal_to_the_current_token_keeps_it_and_clears_the_candidate():
    trace = replay(P, switched_to(FAST) + [cell(INT4), cell(FAST)])
    assert (trace.steps[-1].output, trace.steps[-1].reason) == (FAST, Reason.KEEP_CURRENT)
    assert trace.steps[-1].after == State(FAST, NO_CANDIDATE, 0, 2)


def test_confirm_one_and_no_cooldown_switch_at_once_every_cycle():
    quick = MachineParams(4, KEEP, 1, 0, frozenset(), (0, 1, 2, 3))
    assert run([cell(FAST), cell(INT4), cell(FAST)], quick) == [
        (FAST, Reason.SWITCH),
        (INT4, Reason.SWITCH),
        (FAST, Reason.SWITCH),
    ]


def test_the_step_is_pure():
    state = State(FAST, INT4, 2, 3)
    first = step(P, state, INT4, ALL, True, True, None)
    assert step(P, state, INT4, ALL, True, True, None) == first and state == State(FAST, INT4, 2, 3)


def test_params_from_the_example_spec():
    params = MachineParams.from_spec(load_spec(EXAMPLE))
    assert params == MachineParams(
        n_tokens=5,
        conservative=0,
        confirm_cycles=3,
        cooldown_cycles=8,
        overridable=frozenset({0, 3}),
        codes=(0, 1, 2, 3, 4),
        legal=frozenset({0, 1, 2, 3}),
    )
    assert params.legal_codes == frozenset({0, 1, 2, 3})


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(n_tokens=17, codes=tuple(range(17))), r"^MachineParams: n_tokens=17 is outside 1\.\.16; "),
        (dict(conservative=3, legal=frozenset({0, 1})), r"^MachineParams: conservative=3 is not in legal=\[0, 1\]; "),
        (
            dict(overridable=frozenset({2}), legal=frozenset({0, 1})),
            r"^MachineParams: overridable=\[2\] is not a subset",
        ),
        (dict(confirm_cycles=0), r"^MachineParams: confirm_cycles=0 is below 1; "),
        (dict(cooldown_cycles=-1), r"^MachineParams: cooldown_cycles=-1 is negative; "),
        (
            dict(codes=(0, 1, 1, 3)),
            r"^MachineParams: codes=\[0, 1, 1, 3\] is not one distinct 4-bit code per token; "
            r"build the parameters with MachineParams.from_spec$",
        ),
        (dict(codes=(0, 1, 2, 16)), r"^MachineParams: codes=\[0, 1, 2, 16\] is not one distinct 4-bit code"),
        (dict(legal=frozenset({0, 5})), r"^MachineParams: legal=\[0, 5\] names tokens outside 0\.\.3; "),
    ],
)
def test_invalid_params_are_refused(changes, message):
    fields = dict(
        n_tokens=4, conservative=0, confirm_cycles=3, cooldown_cycles=4, overridable=frozenset({0}), codes=(0, 1, 2, 3)
    )
    fields.update(changes)
    with pytest.raises(SpecError, match=message):
        MachineParams(**fields)


# ---------------------------------------------------------------- the explicit model


@pytest.mark.slow
def test_enumeration_proves_every_property_of_the_example_machine_and_the_invariant_holds_where_reachable():
    params = MachineParams.from_spec(load_spec(EXAMPLE))
    exploration = explore(params, alphabet(params, free_rows(params)))
    assert exploration.complete and not exploration.first_violation
    assert all(invariant_holds(params, *node) for node in exploration.parent)
    assert {p.verdict for p in check_explicit(params, alphabet(params, free_rows(params)))} == {"proved"}


def test_free_rows_are_exactly_what_a_sound_table_can_show():
    rows = free_rows(P)
    assert len(rows) == len(set(rows)) == 8 + 3 * 4
    assert all(r[KEEP] and r[p] for p, r in rows)


def test_transition_violations_judges_each_property():
    node = (State(FAST), 0)
    assert transition_violations(
        P, node, cell(INT4), (State(INT4), INT4, Reason.SWITCH), (State(INT4), INT4, Reason.SWITCH)
    ) == {"switch-cooldown"}
    assert transition_violations(
        P,
        node,
        cell(INT4, row(FAST), override=OFFLOAD),
        (State(FAST), FAST, Reason.OVERRIDE),
        (State(FAST), FAST, Reason.OVERRIDE),
    ) == {"output-allowed", "override-allowed"}
    assert transition_violations(
        P, node, outside(), (State(FAST), FAST, Reason.KEEP_CURRENT), (State(FAST), FAST, Reason.KEEP_CURRENT)
    ) == {"fallback-conservative"}
    assert transition_violations(
        P, node, cell(FAST), (State(FAST), FAST, Reason.KEEP_CURRENT), (State(FAST, 1, 1), FAST, Reason.KEEP_CURRENT)
    ) == {"total-deterministic"}
    assert transition_violations(P, node, cell(FAST), ValueError("boom"), None) == {"total-deterministic"}
    illegal = MachineParams(4, KEEP, 1, 0, frozenset(), (0, 1, 2, 3), legal=frozenset({0, 1}))
    assert transition_violations(
        illegal, node, cell(INT4), (State(INT4), INT4, Reason.SWITCH), (State(INT4), INT4, Reason.SWITCH)
    ) == {"output-legal"}


@st.composite
def machines(draw):
    """Random small parameters and a few cells: (params, [(proposal, allowed row)])."""
    n = draw(st.integers(2, 4))
    conservative = draw(st.integers(0, n - 1))
    legal = draw(st.sets(st.integers(0, n - 1))) | {conservative}
    params = MachineParams(
        n_tokens=n,
        conservative=conservative,
        confirm_cycles=draw(st.integers(1, 3)),
        cooldown_cycles=draw(st.integers(0, 3)),
        overridable=frozenset(draw(st.sets(st.sampled_from(sorted(legal))))),
        codes=tuple(draw(st.permutations(range(16)))[:n]),
        legal=frozenset(legal),
    )
    cells = []
    for _ in range(draw(st.integers(1, 4))):
        proposal = draw(st.sampled_from(sorted(legal)))
        allowed = tuple(k in legal and (k in (proposal, conservative) or draw(st.booleans())) for k in range(n))
        cells.append((proposal, allowed))
    return params, cells


def reference_run(params: MachineParams, inputs) -> list[tuple[int, Reason]]:
    """(output, reason) per cycle, written from the priority rules over the input history, not from `step`.

    Where `step` keeps a candidate register, a count and a cooldown counter,
    this model keeps the streak of consecutive table-path cycles proposing
    one token and the number of cycles since the cooldown last restarted
    (a fallback, a move down or any switch restarts it; it has run out
    once that many cycles have passed).
    """
    current = params.conservative
    since_restart = math.inf
    streak_token, streak = None, 0
    emitted = []
    for item in inputs:
        since_restart += 1
        cooled = since_restart >= params.cooldown_cycles
        override, refusal, output = item.override, None, None
        if not item.in_envelope or not item.sla_ok or not item.allowed[current]:
            reason = (
                Reason.FALLBACK_ENVELOPE
                if not item.in_envelope
                else Reason.FALLBACK_SLA
                if not item.sla_ok
                else Reason.LEGALITY_PREEMPT
            )
            output = params.conservative
        elif override is not None and override in params.overridable and item.allowed[override]:
            streak_token, streak = None, 0
            if override == current or override == params.conservative or cooled:
                output, reason = override, Reason.OVERRIDE
            else:
                reason = Reason.OVERRIDE_WAITING
        else:
            if override is not None:
                refusal = (
                    Reason.OVERRIDE_REFUSED_NOT_OVERRIDABLE
                    if override not in params.overridable
                    else Reason.OVERRIDE_REFUSED_FORBIDDEN
                )
            proposal = item.proposal
            if proposal == current:
                streak_token, streak, reason = None, 0, Reason.KEEP_CURRENT
            elif proposal == params.conservative:
                output, reason = proposal, Reason.MOVE_DOWN
            else:
                streak = streak + 1 if streak_token == proposal else 1
                streak_token = proposal
                if streak >= params.confirm_cycles and cooled:
                    output, reason = proposal, Reason.SWITCH
                else:
                    reason = Reason.HOLD_CONFIRMING if streak < params.confirm_cycles else Reason.HOLD_COOLDOWN
        if output is not None and not (reason == Reason.OVERRIDE and output == current):
            current, since_restart, streak_token, streak = output, 0, None, 0
        emitted.append((current, refusal or reason))
    return emitted


def test_the_reference_model_follows_the_scenarios_above():
    assert reference_run(P, [cell(FAST)] * 3) == [
        (KEEP, Reason.HOLD_CONFIRMING),
        (KEEP, Reason.HOLD_CONFIRMING),
        (FAST, Reason.SWITCH),
    ]
    assert reference_run(P, switched_to(FAST) + [cell(INT4)] * 3)[-1] == (FAST, Reason.HOLD_COOLDOWN)
    assert reference_run(P, switched_to(FAST) + [cell(INT4)] * 4)[-1] == (INT4, Reason.SWITCH)


@settings(max_examples=examples(60), deadline=None)
@given(machines(), st.data())
def test_random_sequences_agree_with_a_reference_model_and_keep_every_property(machine, data):
    params, cells = machine
    exploration = explore(params, alphabet(params, cells))
    overrides = st.one_of(st.none(), st.integers(0, params.n_tokens - 1))
    one_input = st.one_of(
        st.builds(
            lambda c, sla, o: MachineInput(*cells[c], True, sla, o),
            st.integers(0, len(cells) - 1),
            st.booleans(),
            overrides,
        ),
        st.builds(lambda sla, o: MachineInput(None, None, False, sla, o), st.booleans(), overrides),
    )
    inputs = data.draw(st.lists(one_input, max_size=40))
    trace = replay(params, inputs)
    assert [(s.output, s.reason) for s in trace.steps] == reference_run(params, inputs)
    node = initial_node(params)
    for s in trace.steps:
        again = step(
            params,
            s.before,
            s.inputs.proposal,
            s.inputs.allowed,
            s.inputs.in_envelope,
            s.inputs.sla_ok,
            s.inputs.override,
        )
        assert not transition_violations(params, node, s.inputs, (s.after, s.output, s.reason), again)
        node = (s.after, next_since(params, node, s.output))
        assert node in exploration.parent, "the explicit model must reach every node a run visits"
        assert invariant_holds(params, *node)
