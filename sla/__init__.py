"""certfsm.sla: per-path SLA monitoring that tells the certified machine when to fall back.

A spec's ``sla.paths`` each say: on the cycles whose decision path is one
of `tokens` (default: every token), `statistic` of `metric` must stay at
or below `limit`, with at most `max_violations` violations in the last
`window` cycles; after a breach the path is healthy again only after
`recovery_cycles` consecutive good cycles. `SlaMonitor` runs them, one
`update(metrics, token)` per machine cycle, and the `ok` of the
`SlaStatus` it returns is the machine's `sla_ok` for that same cycle: a
breach makes the machine emit the conservative token at once
(FALLBACK_SLA), and it may leave the fallback only once every path has
recovered.

Definitions (stated once, in `certfsm.sla._path`; summarised here):

- a path *applies* in a cycle when the token the metrics were measured on
  is one of its tokens;
- a metric is *missing* when absent, None, NaN or infinite; otherwise its
  float64 value is the cycle's *sample*;
- the *statistic* is the sample itself (``value``) or, over the samples
  of the last `window` cycles on which the path applied, the nearest-rank
  percentile (``p50``, ``p95``, ``p99``: the ceil(q n / 100)-th smallest
  of n samples, always one of the samples) or the exact mean (``mean``);
- a *violation* is a cycle where the path applies and the metric is
  missing or the statistic exceeds the limit (equal is within the SLA);
- the path is *over* when the violations among the last `window` cycles
  (this one included) exceed `max_violations`; a *good* cycle is neither
  a violation nor over;
- the path is *breached* from the first cycle it is over until the
  `recovery_cycles`-th consecutive good cycle (0: until it is no longer
  over); `ok` is True exactly when no path is breached.

Time and metrics are inputs only: nothing here reads a clock, so a run is
a function of its (metrics, token) sequence and a replay reproduces it.
Statistics are exact (sorted ring buffers for the percentiles, an exact
integer sum for the mean), O(log window) comparisons per update. The
state is a small JSON document (`snapshot`, `restore`, `copy`) for the
audit log and for replays.

Homes: `SlaMonitor` in `_monitor`, one path's latch in `_path`, the
statistics in `_statistic` over the ring buffers of `_window`, the
reported `SlaStatus` in `_status`, snapshots in `_snapshot`; a spec's SLA
path itself is the core's `certfsm.SlaPath`.

Standard library only: this package imports neither numpy, solvers nor
`certfsm.verify` / `certfsm.fsm`, so the runtime can embed it anywhere.
"""

from ._monitor import SlaMonitor, read_metric
from ._snapshot import SNAPSHOT_FORMAT, SnapshotError
from ._statistic import STATISTICS
from ._status import PathStatus, SlaStatus
from ._window import nearest_rank

__all__ = [
    "PathStatus", "SNAPSHOT_FORMAT", "STATISTICS", "SlaMonitor", "SlaStatus", "SnapshotError", "nearest_rank",
    "read_metric",
]
