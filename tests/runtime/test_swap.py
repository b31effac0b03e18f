"""Hot swaps between grids of different sizes, and swaps and reloads that are refused.

The oracle of a swap: the last reading binned by the new machine (never
the old cell index), then `Machine.step` of the new machine from the
state the swap leaves. A refusal changes nothing and is counted, logged
in the audit log and told in one line naming the file and why.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from certfsm import ArtifactError, runtime
from certfsm.machine import NO_CANDIDATE, OUT_OF_ENVELOPE
from certfsm.runtime import RuntimeCounters, read_log, replay_log, verify_log
from certfsm.runtime._audit_format import RefusalRecord, SwapRecord
from certfsm.runtime._probes import ProbeSample
from certfsm.runtime._run import run

UPPER = np.array([100.0, 100.0, 100.0, 110.0, 64.0])
LOWER = np.array([0.0, 0.0, 0.0, 20.0, 0.0])


@pytest.fixture(scope="module")
def fine(distilled_example):
    return distilled_example[2]


def kept_after_swap(machine, state_before, reading) -> int:
    """The token a swap to `machine` keeps: the current one where `machine` allows it in the reading's cell."""
    cell = machine.cell_of(reading)
    if cell != OUT_OF_ENVELOPE and machine.allowed[cell] >> state_before.current & 1:
        return state_before.current
    return machine.params.conservative


def follow(controller, machine, rows, state):
    """Step `controller` on `rows` and check every decision against `machine.step` from `state`."""
    for row in rows:
        state, token, reason = machine.step(state, machine.cell_of(row))
        decision = controller.step(row)
        assert (decision.cell, decision.index, decision.reason, decision.state) == (
            machine.cell_of(row),
            token,
            reason,
            state,
        )
    return state


@pytest.mark.slow
@pytest.mark.parametrize("observed", [False, True], ids=["closure", "general cycle"])
def test_swaps_between_grids_of_different_sizes_rebin_the_last_reading(fine, coarse_example, observed):
    machines = [runtime.load_machine(fine), runtime.load_machine(coarse_example)]
    assert machines[0].n_cells == 7200 and machines[1].n_cells == 16
    record = (lambda *decision_and_inputs: None) if observed else None
    controller = runtime.Controller(machines[0], record=record)
    rng = np.random.default_rng(3)
    state = machines[0].initial_state()
    for swap in range(12):
        machine = machines[swap % 2]
        rows = rng.uniform(LOWER, UPPER, size=(int(rng.integers(1, 40)), 5)).tolist()
        state = follow(controller, machine, rows, state)
        new = machines[(swap + 1) % 2]
        before = controller.state
        controller.swap(new)
        state = controller.state
        assert state.current == kept_after_swap(new, before, rows[-1]) and state.candidate == NO_CANDIDATE
        assert state.cooldown == min(before.cooldown, new.params.cooldown_cycles)
    assert controller.machine is machines[0]


def test_a_swap_to_a_finer_grid_looks_up_the_reading_not_the_old_cell_index(fine, coarse_example):
    """A reading whose coarse cell index names a fine cell where OFFLOAD_CPU is forbidden, while the reading's own
    fine cell allows it: reusing the index would drop the token, re-binning keeps it."""
    coarse, finer = runtime.load_machine(coarse_example), runtime.load_machine(fine)
    offload = coarse.tokens.index("OFFLOAD_CPU")
    reading = next(
        row
        for row in np.random.default_rng(0).uniform(LOWER, UPPER, size=(5000, 5)).tolist()
        if finer.allowed[finer.cell_of(row)] >> offload & 1 and not finer.allowed[coarse.cell_of(row)] >> offload & 1
    )
    assert offloaded_then_swapped(coarse, finer, lambda controller: controller.step(reading)) == offload


def test_a_swap_rebins_a_fixed_point_reading_by_the_integer_path(fine, coarse_example):
    coarse, finer = runtime.load_machine(coarse_example), runtime.load_machine(fine)
    offload = coarse.tokens.index("OFFLOAD_CPU")
    scale = [1 << bits for bits in finer.frac_bits]
    rows = np.random.default_rng(1).uniform(LOWER, UPPER, size=(5000, 5))
    integers = next(
        values
        for values in (np.floor(rows * scale).astype(int).tolist())
        if finer.allowed[finer.cell_of_fixed(values)] >> offload & 1
        and not finer.allowed[coarse.cell_of_fixed(values)] >> offload & 1
    )
    assert offloaded_then_swapped(coarse, finer, lambda controller: controller.step_fixed(integers)) == offload


def offloaded_then_swapped(coarse, finer, step) -> int:
    """Force OFFLOAD_CPU on the coarse machine for one cycle of `step`, swap to the finer one: the token in force."""
    controller = runtime.Controller(coarse)
    controller.override("OFFLOAD_CPU")
    assert step(controller).token == "OFFLOAD_CPU"
    controller.override(None)
    controller.swap(finer)
    return controller.state.current


def test_a_swap_before_any_reading_starts_from_the_conservative_token(fine, coarse_example):
    controller = runtime.load(fine)
    controller.swap(runtime.load_machine(coarse_example))
    assert controller.state.current == controller.machine.params.conservative


def test_a_logged_run_with_swaps_across_grids_replays(fine, coarse_example, tmp_path):
    machines = [runtime.load_machine(fine), runtime.load_machine(coarse_example)]
    controller = runtime.load(fine)
    rng = np.random.default_rng(8)
    with runtime.open_audit(controller, tmp_path / "run.log"):
        for k in range(600):
            if k % 100 == 99:
                controller.swap(machines[(k // 100 + 1) % 2])
            row = rng.uniform(LOWER, UPPER).tolist()
            if k % 3:
                controller.step(row, {"latency_ms": 4.0}, float(k))
            else:
                controller.step_fixed(
                    [math.floor(v * (1 << b)) for v, b in zip(row, controller.machine.frac_bits)],
                    {"latency_ms": 4.0},
                    float(k),
                )
    assert sum(isinstance(r, SwapRecord) for r in read_log(tmp_path / "run.log")) == 6
    outcome = replay_log(tmp_path / "run.log", [fine, coarse_example])
    assert outcome.ok and outcome.steps == 600, outcome


# ------------------------------------------------------------- refusals


def other_machines(machine):
    """Machines another layout makes unfit for a swap, with what the refusal must say."""
    no_fixed = dataclasses.replace(
        machine,
        edges=((0.0, 33.3, 100.0), *machine.edges[1:]),
        proposal=machine.proposal[:8] * 2,
        exact=machine.exact[:8] * 2,
        allowed=machine.allowed[:8] * 2,
    )
    return [
        (
            dataclasses.replace(machine, names=(*machine.names[:4], "queue_len")),
            r"inputs \(compute_util, mem_bw_util, l2_miss_rate, temperature, queue_len\) differ from those of the "
            r"running artifact [0-9a-f]{12} \(compute_util, .*, queue_depth\); a hot swap keeps the layout; distil the "
            r"new artifact from a spec with the same inputs and outputs$",
        ),
        (
            dataclasses.replace(machine, frac_bits=(6, 6, 6, 4, 2)),
            r"inputs' frac_bits \[6, 6, 6, 4, 2\] differ from those of the running artifact [0-9a-f]{12} "
            r"\[6, 6, 6, 4, 0\] \(a fixed-point integer would change meaning\); a hot swap keeps the layout",
        ),
        (
            dataclasses.replace(machine, tokens=("KEEP", "FUSE", *machine.tokens[2:])),
            r"tokens \(KEEP, FUSE, INT4, OFFLOAD_CPU, SPARSE_2_4\) differ from those of the running artifact",
        ),
        (
            dataclasses.replace(machine, params=dataclasses.replace(machine.params, codes=(0, 1, 2, 3, 5))),
            r"token codes \[0, 1, 2, 3, 5\] differ from those of the running artifact [0-9a-f]{12} \[0, 1, 2, 3, 4\]",
        ),
        (
            no_fixed,
            r"has no fixed-point path, which the running artifact [0-9a-f]{12} has \(inputs\[0\] "
            r"\(compute_util\): .*\); a hot swap keeps the layout",
        ),
    ]


def test_a_swap_to_another_layout_is_refused_counted_and_logged_and_the_machine_in_force_goes_on(
    coarse_example, tmp_path
):
    controller = runtime.load(coarse_example)
    machine = controller.machine
    counters = RuntimeCounters(machine.tokens)
    controller.attach_counters(counters)
    writer = runtime.open_audit(controller, tmp_path / "run.log")
    controller.step([50.0, 50.0, 50.0, 50.0, 10.0], {"latency_ms": 4.0}, 0.0)
    before = controller.state
    cases = other_machines(machine)
    for k, (other, message) in enumerate(cases):
        source = f"/srv/artifacts/new-{k}.cfsm"
        with pytest.raises(ArtifactError, match="^" + re.escape(source) + ": " + message):
            controller.swap(other, source=source)
        assert controller.machine is machine and controller.state == before
    with pytest.raises(ArtifactError, match=r"^artifact [0-9a-f]{12}: inputs \("):
        controller.swap(cases[0][0])
    controller.step([50.0, 50.0, 50.0, 50.0, 10.0], {"latency_ms": 4.0}, 1.0)
    writer.close()
    assert (counters.snapshot().refused_reloads, counters.snapshot().swaps) == (len(cases) + 1, 0)
    refusals = [r for r in read_log(tmp_path / "run.log") if isinstance(r, RefusalRecord)]
    assert [r.reason.split(":")[0] for r in refusals[:-1]] == [
        f"/srv/artifacts/new-{k}.cfsm" for k in range(len(cases))
    ]
    assert all(r.artifact_sha256 == machine.artifact_sha256 == r.refused_sha256 for r in refusals)
    assert verify_log(tmp_path / "run.log").ok
    assert replay_log(tmp_path / "run.log", [coarse_example]).ok


class ListProbe:
    """A probe over fixed rows of the example's inputs, with a quiet latency metric."""

    def __init__(self, rows, names) -> None:
        self.rows, self.names = list(rows), names

    def sample(self, now):
        if not self.rows:
            raise EOFError
        return ProbeSample(now, dict(zip(self.names, self.rows.pop(0))), {"latency_ms": 4.0})


def test_a_refused_reload_is_told_counted_once_and_logged_and_the_run_goes_on(
    fine, coarse_example, renamed_example, tmp_path, capsys
):
    """Reloads of one file every 10 cycles while it is replaced on disk, in turn, by: a coarser grid (swapped), an
    uncertified artifact, a damaged one, one of another layout, nothing, and a loader that fails in another way.
    Each refusal is told in one line naming the file, counted once (counters attached and passed), logged; the
    run goes on and its log replays."""
    import json
    import shutil

    from certfsm import write_artifact

    payload = json.loads(coarse_example.read_text())["payload"]
    payload["certificate"][0]["verdict"] = "unknown"
    uncertified = tmp_path / "uncertified.cfsm"
    write_artifact(uncertified, payload)
    damaged = tmp_path / "damaged.cfsm"
    damaged.write_bytes(coarse_example.read_bytes()[:-9])
    refused = [
        (uncertified, r": certificate\[0\] .* has verdict 'unknown', but the runtime needs it proved"),
        (damaged, r": "),
        (renamed_example, r": inputs \(.*queue_len\) differ from those of the running "),
        (None, r": no such file"),
        ("broken", r": RuntimeError: the disk went away$"),
    ]
    order = iter([coarse_example, *(source for source, _ in refused)])
    slot = tmp_path / "next.cfsm"

    def reload():
        source = next(order)
        slot.unlink(missing_ok=True)
        if source == "broken":
            raise RuntimeError("the disk went away")
        if source is not None:
            shutil.copyfile(source, slot)
        return runtime.load_machine(slot)

    cycles = iter(range(10_000))
    controller = runtime.load(fine)
    counters = RuntimeCounters(controller.machine.tokens)
    controller.attach_counters(counters)
    told: list[str] = []
    rows = np.random.default_rng(2).uniform(LOWER, UPPER, size=(65, 5)).tolist()  # six reloads
    log = tmp_path / "run.log"
    with runtime.open_audit(controller, log):
        summary = run(
            controller,
            ListProbe(rows, controller.machine.names),
            should_reload=lambda: next(cycles) % 10 == 9,
            reload=reload,
            counters=counters,
            reload_source=str(slot),
            on_refused=told.append,
        )
    assert summary.steps == 65 and len(summary.swaps) == 1 and controller.machine.n_cells == 16
    assert summary.refused_reloads == told and len(told) == len(refused) == counters.snapshot().refused_reloads
    for message, (_, reason) in zip(told, refused):
        assert message.startswith(f"{slot}: ") and re.search(reason, message), message
    records = list(read_log(log))
    assert [r.reason for r in records if isinstance(r, RefusalRecord)] == told
    assert [r.refused_sha256 is not None for r in records if isinstance(r, RefusalRecord)] == [
        False,
        False,
        True,
        False,
        False,
    ]
    assert replay_log(log, [fine, coarse_example]).ok

    controller = runtime.load(fine)
    run(
        controller,
        ListProbe(rows, controller.machine.names),
        steps=3,
        should_reload=lambda: True,
        reload=lambda: runtime.load_machine(renamed_example),
    )
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(
        re.match(
            r"^certfsm run: reload refused, the machine in force goes on: "
            r"artifact [0-9a-f]{12}: inputs \(",
            line,
        )
        for line in lines
    ), lines


def test_with_trusted_keys_a_reload_signed_by_another_key_is_refused_and_one_signed_by_ours_swaps(
    fine, coarse_example, tmp_path
):
    pytest.importorskip("cryptography", reason="the sign extra (cryptography) is not installed")
    import shutil

    from certfsm import generate_key_pair, sign_artifact

    generate_key_pair(tmp_path / "ours")
    generate_key_pair(tmp_path / "theirs")
    slot = tmp_path / "next.cfsm"
    signers = iter(["theirs", "ours"])

    def reload():
        shutil.copyfile(coarse_example, slot)
        sign_artifact(slot, tmp_path / next(signers))
        return runtime.load_machine(slot, trusted_keys=[tmp_path / "ours.pub"])

    controller = runtime.load(fine)
    rows = np.random.default_rng(5).uniform(LOWER, UPPER, size=(4, 5)).tolist()
    told: list[str] = []
    summary = run(
        controller,
        ListProbe(rows, controller.machine.names),
        steps=3,
        should_reload=iter([False, True, True]).__next__,
        reload=reload,
        reload_source=str(slot),
        on_refused=told.append,
    )
    untrusted = re.escape(f"{slot}: signed by key id ") + r"[0-9a-f]{16}, which is not a trusted key \(trusted: key id "
    assert len(told) == 1 and re.match(untrusted, told[0]), told
    assert len(summary.swaps) == 1 and controller.machine.n_cells == 16
