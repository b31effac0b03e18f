"""certfsm.sla: per-path SLA monitoring that tells the certified machine when to fall back.

A spec's ``sla.paths`` each say: on the cycles whose decision path is one
of `tokens` (default: every token), `statistic` of `metric` must stay at
or below `limit`, with at most `max_violations` violations in the last
`window` cycles; after a breach the path is healthy again only after
`recovery_cycles` consecutive good cycles.

Exports:

- `SlaMonitor` runs them, one `update(metrics, token)` per machine cycle
  (`update_ok` for the runtime, without the per-path figures); the `ok`
  of the status it returns is the machine's `sla_ok` for that same cycle:
  a breach makes the machine emit the conservative token at once
  (FALLBACK_SLA), and it may leave the fallback only once every path has
  recovered. Its `on_missing` hook is told of a path whose metric a
  cycle's metrics leave out (the runtime warns once).
- `SpecWithSla`: what `SlaMonitor.from_spec` reads of a spec (its
  `sla_paths` and `outputs`), so that the runtime can pass the spec an
  artifact stores without this package importing more of the core.

Definitions (stated once, in `certfsm.sla._path`; summarised here):

- a path *applies* in a cycle when the token the metrics were measured on
  is one of its tokens;
- a metric gives a *sample* when it is a real number from 0 up to the
  largest float64, read exactly (an int, Fraction, Decimal or numpy
  number means the value it denotes; -0.0 is 0.0, a valid zero); absent,
  None, NaN, infinite, negative (what a clock that stepped back measures)
  or beyond float64's range, it gives none;
- the *statistic* is the sample itself (``value``) or, over the samples
  of the last `window` cycles on which the path applied, the nearest-rank
  percentile (``p50``, ``p95``, ``p99``: the ceil(q n / 100)-th smallest
  of n samples, always one of the samples) or the exact mean (``mean``);
- a *violation* is a cycle where the path applies and the metric gives no
  sample or the statistic exceeds the limit, the exact decimal the spec
  wrote, compared exactly (equal is within the SLA; the float 0.1 is
  above the limit 0.1, the float 0.3 below the limit 0.3);
- the path is *over* when the violations among the last `window` cycles
  (this one included) exceed `max_violations`; a *good* cycle is neither
  a violation nor over;
- the path is *breached* from the first cycle it is over until the
  `recovery_cycles`-th consecutive good cycle (0: until it is no longer
  over); `ok` is True exactly when no path is breached.

Time and metrics are inputs only: nothing here reads a clock, so a run is
a function of its (metrics, token) sequence and a replay reproduces it.
Statistics are exact (sorted ring buffers for the percentiles, an exact
integer sum for the mean), O(log window) comparisons per update; a float
sample is compared with the largest float64 <= the limit, computed once.
The state is a small JSON document (`SlaMonitor.snapshot`, `restore`, `copy`) for
the audit log and for replays.

Homes: `SlaMonitor` and `SpecWithSla` in `_monitor`, what a metric gives and how it meets a
limit in `_sample`, one path's latch in `_path`, the statistics in
`_statistic` over the ring buffers of `_window`, the reported status
(`SlaStatus`) in `_status`, snapshots in `_snapshot`; a spec's SLA path
itself is the core's `certfsm.SlaPath`.

Standard library only: this package imports neither numpy, solvers nor
`certfsm.verify` / `certfsm.fsm` (from the core only the errors,
`SlaPath` and the standard-library `decimal_value` and `float_at_most`),
so the runtime can embed it anywhere.
"""

from ._monitor import SlaMonitor, SpecWithSla

__all__ = [
    "SlaMonitor",
    "SpecWithSla",
]
