"""What `distill` tells its `progress` callback: the phase, the hard cells left, the exact share, an estimate.

`progress(done_cells, total_cells, message)` is called after every batch
of decided cells; the message reads

    engines: 148 hard cells left, 61.3% exact so far, about 4 min left

Phases, in order: ``sampling``, ``bound propagation`` (while chunks of
cells are still being bounded; with one job the engines already work on
the cells each chunk left open, with more they wait behind the chunks),
``engines`` (only hard cells are left). A hard cell is one that sampling
and bound propagation left to the engines (phase 3 of `_distill`). The
estimate counts what is left in worker seconds, at the mean of what each
kind of task took so far, shared by the jobs; until the first hard cell
is done it gives bound propagation's alone. It is only a guide: hard
cells differ by orders of magnitude, and later chunks may leave more of
them. Nothing here decides a cell: the clock only feeds words.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

PHASES = ("sampling", "bound propagation", "engines")


@dataclass
class _Tally:
    """Counts of the running distillation, kept by the calling process only (see `_distill`)."""

    total: int
    jobs: int
    phase: str = PHASES[0]
    decided: int = 0
    exact: int = 0
    chunks: int = 0
    chunks_done: int = 0
    chunk_seconds: float = 0.0
    hard: int = 0
    hard_done: int = 0
    hard_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def count(self, decisions, exact_status: int) -> None:
        self.decided += len(decisions)
        self.exact += sum(d.status == exact_status for d in decisions)

    def bounded(self, seconds: float, left_open: int) -> None:
        self.chunks_done += 1
        self.chunk_seconds += seconds
        self.hard += left_open
        if self.chunks_done >= self.chunks:
            self.phase = PHASES[2]

    def engine_done(self, seconds: float) -> None:
        self.hard_done += 1
        self.hard_seconds += seconds

    def seconds_left(self) -> tuple[float | None, float | None]:
        """Wall seconds still to spend on bound propagation and on the hard cells known so far (worker seconds
        at the mean so far, shared by the jobs); None for a kind of task none of which is done yet."""
        chunks_left, hard_left = self.chunks - self.chunks_done, self.hard - self.hard_done
        bounds = hard = 0.0
        if chunks_left:
            bounds = chunks_left * self.chunk_seconds / self.chunks_done / self.jobs if self.chunks_done else None
        if hard_left:
            hard = hard_left * self.hard_seconds / self.hard_done / self.jobs if self.hard_done else None
        return bounds, hard

    def message(self) -> str:
        share = self.exact / self.decided if self.decided else 0.0
        words = f"{self.phase}: {self.hard - self.hard_done} hard cells left, {share:.1%} exact so far"
        if self.phase == PHASES[0]:
            return words
        bounds, hard = self.seconds_left()
        if bounds is None:
            return words + ", estimate after the first chunks"
        if hard is None:
            return words + f", about {_duration(bounds)} left in bound propagation, then the hard cells"
        return words + (f", about {_duration(bounds + hard)} left" if bounds + hard > 0 else "")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
