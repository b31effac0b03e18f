"""The monitor in the loop with the certified step function: fallback in the breach cycle, return after recovery.

Each cycle the metrics were measured on the token in force during the
cycle before (the work the controller configured), the monitor's `ok`
goes to `step` as `sla_ok` in the same cycle, exactly as the runtime
wires them.
"""

from __future__ import annotations

from certfsm import SlaPath
from certfsm.machine import MachineParams, Reason, initial_state, step
from certfsm.sla import SlaMonitor

NAMES = ("KEEP", "FUSE_CONV", "INT4")
KEEP, INT4 = 0, 2
ANYWHERE = (True, True, True)


def test_a_breach_falls_back_in_the_same_cycle_and_the_token_returns_only_after_recovery():
    params = MachineParams(
        n_tokens=3, conservative=KEEP, confirm_cycles=1, cooldown_cycles=0, overridable=(), codes=(0, 1, 2)
    )
    monitor = SlaMonitor([SlaPath("int4-latency", "latency_ms", 25.0, 4, 1, 2, tokens=("INT4",))], tokens=NAMES)
    state, token = initial_state(params), KEEP
    latency = {KEEP: 30.0, INT4: 20.0}  # KEEP is slow but out of scope; INT4 meets its SLA until it degrades
    trace = []
    for cycle in range(1, 15):
        if 3 <= cycle <= 4 and token == INT4:
            latency[INT4] = 40.0
        elif cycle > 4:
            latency[INT4] = 20.0
        status = monitor.update({"latency_ms": latency[token]}, NAMES[token])
        state, token, reason = step(params, state, INT4, ANYWHERE, True, status.ok)  # the table keeps proposing INT4
        trace.append((cycle, status.ok, NAMES[token], reason))
        if not status.ok:
            assert (token, reason) == (KEEP, Reason.FALLBACK_SLA)
    oks = "".join("." if ok else "X" for _, ok, _, _ in trace)
    tokens = [name for _, _, name, _ in trace]
    # cycle 1: measured on KEEP (out of scope), INT4 proposed and taken; 2: INT4 at 20 ms;
    # 3, 4: INT4 at 40 ms, the second violation within 4 cycles breaches in cycle 4 -> KEEP at once;
    # 5, 6: on KEEP (out of scope), still over (cycles 3, 4 in the window); 7: cycle 3 has left,
    # within budget, the 1st good cycle; 8: the 2nd recovers -> INT4 again in cycle 8
    assert oks == "...XXXX......."
    assert tokens[:3] == ["INT4"] * 3 and tokens[3:7] == ["KEEP"] * 4 and tokens[7:] == ["INT4"] * 7
    assert trace[3][3] == Reason.FALLBACK_SLA and trace[7][3] == Reason.SWITCH
