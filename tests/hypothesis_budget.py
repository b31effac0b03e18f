"""How many examples a hypothesis test draws: all of them in the full run, a tenth in the fast run.

Why: `python3 -m pytest -q -m "not slow"` is the developer's quick loop and
must stay well under a minute; the full run (`python3 -m pytest -q`, CI)
keeps every test's own count. A count set in ``@settings`` wins over any
hypothesis profile, so the tests pass their count through `examples`,
which conftest.py switches to the fast budget when the run deselects the
slow tests. The fast run still draws at least `FLOOR` examples.
"""

from __future__ import annotations

FAST_SHARE = 10
"""The fast run draws one in this many of a test's examples."""
FLOOR = 3
fast = False
"""True when the run is ``-m "not slow"``; set once by conftest.py before the test modules are imported."""


def examples(full: int) -> int:
    """`full` in the full run; in the fast run a tenth of it, at least FLOOR and at most `full`."""
    return min(full, max(FLOOR, full // FAST_SHARE)) if fast else full
