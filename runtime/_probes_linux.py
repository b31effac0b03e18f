"""`LinuxProbe`: the standard quantities from /proc and /sys, missing where the machine has no source.

Sources, each read on every `sample` (all paths below `root`, "/" by
default, so tests can point the probe at a folder of crafted files):

- compute_util: /proc/stat's aggregate ``cpu`` line. Its counters are
  cumulative since boot, so utilisation is the busy share of the ticks
  that passed *between two samples*: the first sample has none (missing).
  Busy is everything but idle and iowait. The probe reads the counters
  when it is built, so its first sample measures the time since then.
  When no tick passed (two calls within one clock tick) the previous
  utilisation is repeated, since the machine has not moved; counters that
  went backwards restart the baseline.
- queue_depth: /proc/stat's ``procs_running``, the kernel's run queue
  (tasks running or ready to run, the probing thread included). It is the
  same count as the runnable field of /proc/loadavg, but it comes from the
  same read as the CPU counters, so both describe one instant. It is a
  proxy: an inference engine's own request queue is not visible to the
  kernel.
- mem_used, mem_total, mem_util: /proc/meminfo's MemTotal and
  MemAvailable (used = total - available). This is capacity, not
  bandwidth.
- mem_bw_used: the resctrl memory-bandwidth monitor (Intel RDT, AMD QoS):
  the sum of /sys/fs/resctrl/mon_data/*/mbm_total_bytes, as a rate
  between two samples. Most machines do not mount resctrl: then missing.
  mem_bw_peak has no source in /sys; give it as ``mem_bw_peak`` (bytes/s,
  from the data sheet) to get mem_bw_util.
- temperature: the hottest /sys/class/thermal/thermal_zone*/temp
  (millidegrees C). The hottest, because the rules that read temperature
  protect the hottest part.
- lK_miss_rate: always missing. Cache misses need hardware performance
  counters (perf_event_open), which /proc and /sys do not expose.

The probe never raises for the machine's state: a missing or unreadable
file, or one it cannot parse, makes the quantities it feeds missing.
"""

from __future__ import annotations

import glob
import math
import numbers
import os
import time

from certfsm import ProbeError

from ._probes import (
    CACHE_LEVELS,
    COMPUTE_UTIL,
    MEM_BW_PEAK,
    MEM_BW_USED,
    MEM_BW_UTIL,
    MEM_TOTAL,
    MEM_USED,
    MEM_UTIL,
    QUEUE_DEPTH,
    STANDARD_QUANTITIES,
    TEMPERATURE,
    HardwareProbe,
    ProbeSample,
    cache_miss_quantity,
    percent,
)

_UNREADABLE = (OSError, ValueError, IndexError)
"""What reading and parsing a kernel file may raise; each means: this source is missing."""


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _is_positive_number(value: object) -> bool:
    # `not value <= 0` is `value > 0` written with what numbers.Real declares (< and <=); NaN fails `< math.inf`
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not value <= 0 and value < math.inf


class LinuxProbe(HardwareProbe):
    """The standard quantities of this Linux machine (see the module docstring for each source)."""

    label = "linux"

    def __init__(self, root: str | os.PathLike[str] = "/", *, mem_bw_peak: float | None = None) -> None:
        if mem_bw_peak is not None and not _is_positive_number(mem_bw_peak):
            raise ProbeError(
                f"LinuxProbe: mem_bw_peak={mem_bw_peak!r} is not a positive number of bytes/s; "
                "give the memory system's peak bandwidth from its data sheet, or None"
            )
        self.root = os.fspath(root)
        self.mem_bw_peak = None if mem_bw_peak is None else float(mem_bw_peak)
        self._cpu: tuple[int, int] | None = None  # (busy, total) ticks at the last sample that saw them advance
        self._cpu_util: float | None = None
        self._mbm: tuple[float, int] | None = None  # (timestamp, bytes) at the last sample
        self._compute_util(_read(self._path("proc", "stat")))

    @property
    def quantities(self) -> frozenset[str]:
        return STANDARD_QUANTITIES

    def _path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def sample(self, now: float | None = None) -> ProbeSample:
        now = time.monotonic() if now is None else now
        stat = _read(self._path("proc", "stat"))
        used, total = self._memory()
        bw_used = self._bandwidth(now)
        values = {
            COMPUTE_UTIL: self._compute_util(stat),
            QUEUE_DEPTH: self._run_queue(stat),
            MEM_USED: used,
            MEM_TOTAL: total,
            MEM_UTIL: percent(used, total),
            MEM_BW_USED: bw_used,
            MEM_BW_PEAK: self.mem_bw_peak,
            MEM_BW_UTIL: percent(bw_used, self.mem_bw_peak),
            TEMPERATURE: self._temperature(),
        }
        values.update((cache_miss_quantity(level), None) for level in CACHE_LEVELS)
        return ProbeSample(now, values)

    def _compute_util(self, stat: str | None) -> float | None:
        if stat is None:
            return None
        try:
            fields = stat.splitlines()[0].split()
            if fields[0] != "cpu":
                return None
            # user nice system idle iowait irq softirq steal; guest time is already counted in user and nice.
            ticks = [int(value) for value in fields[1:9]]
            total = sum(ticks)
            busy = total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
        except _UNREADABLE:
            return None
        if self._cpu is not None and total > self._cpu[1]:
            elapsed = total - self._cpu[1]
            self._cpu_util = min(100.0, max(0.0, 100.0 * (busy - self._cpu[0]) / elapsed))
        elif self._cpu is not None and total == self._cpu[1]:
            return self._cpu_util
        else:
            self._cpu_util = None
        self._cpu = (busy, total)
        return self._cpu_util

    @staticmethod
    def _run_queue(stat: str | None) -> float | None:
        for line in (stat or "").splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0] == "procs_running" and fields[1].isdigit():
                return float(fields[1])
        return None

    def _memory(self) -> tuple[float | None, float | None]:
        kib = {}
        for line in (_read(self._path("proc", "meminfo")) or "").splitlines():
            name, _, rest = line.partition(":")
            fields = rest.split()
            if name in ("MemTotal", "MemAvailable") and fields and fields[0].isdigit():
                kib[name] = int(fields[0])
        total = kib.get("MemTotal")
        available = kib.get("MemAvailable")
        used = None if total is None or available is None else 1024.0 * (total - available)
        return used, None if total is None else 1024.0 * total

    def _bandwidth(self, now: float) -> float | None:
        counters = glob.glob(self._path("sys", "fs", "resctrl", "mon_data", "*", "mbm_total_bytes"))
        try:
            if not counters:
                raise ValueError("no resctrl bandwidth monitor")
            total = sum(int(_read(path) or "") for path in counters)
        except _UNREADABLE:
            self._mbm = None
            return None
        previous, self._mbm = self._mbm, (now, total)
        if previous is None or now <= previous[0] or total < previous[1]:
            return None
        return (total - previous[1]) / (now - previous[0])

    def _temperature(self) -> float | None:
        readings = []
        for path in glob.glob(self._path("sys", "class", "thermal", "thermal_zone*", "temp")):
            try:
                readings.append(int(_read(path) or "") / 1000.0)
            except ValueError:
                continue
        return max(readings, default=None)
