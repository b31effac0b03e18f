"""Golden files for what `certfsm distill` emits on the example: the table and machine .smt2 files and summary.json.

The example is distilled once per session (`distilled_example`); each
emitted text is compared byte for byte with its golden copy in
tests/fsm/golden/. The .smt2 files carry no run facts, so they are compared
as written; summary.json is compared after normalising only what
legitimately varies from run to run or from checkout to checkout: seconds,
cells per second and absolute paths (each .smt2 hash it lists is checked
against the file first, and the artifact's hash is compared as written,
since the artifact is reproducible). Any other change of a byte fails and
names the file; regenerate on purpose with CERTFSM_REGEN_GOLDEN=1 and
review the diff.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("CERTFSM_REGEN_GOLDEN") == "1"


def normalised_summary(data: bytes, folder: Path) -> bytes:
    """summary.json with times and paths replaced, printed the way certfsm prints it.

    Checks first that the file is exactly `json.dumps(..., indent=2)` of
    itself (so the layout is pinned too) and that each certificate entry's
    smt2_sha256 is the hash of that file in `folder`.
    """
    summary = json.loads(data)
    assert json.dumps(summary, indent=2).encode() + b"\n" == data, "summary.json is not printed with indent=2"
    for entry in summary["certificate"]:
        if entry["smt2"] is not None:
            assert entry["smt2_sha256"] == hashlib.sha256((folder / entry["smt2"]).read_bytes()).hexdigest()

    def timed(value):
        return {key: timed(item) for key, item in value.items()} if isinstance(value, dict) else "<seconds>"

    def scrub(value):
        if isinstance(value, dict):
            return {
                key: (
                    timed(item)
                    if key in ("seconds", "cells_per_second")
                    else "<path>"
                    if key == "path"
                    else scrub(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [scrub(item) for item in value]
        return value

    return json.dumps(scrub(summary), indent=2).encode() + b"\n"


def _compare(name: str, produced: bytes) -> None:
    golden = GOLDEN / name
    if REGENERATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_bytes(produced)
    assert golden.exists(), f"{golden} is missing; run with CERTFSM_REGEN_GOLDEN=1 to create it"
    assert produced == golden.read_bytes(), (
        f"{name} differs from tests/fsm/golden/{name}; if the change is "
        "meant, regenerate with CERTFSM_REGEN_GOLDEN=1 and review the diff"
    )


@pytest.fixture(scope="module")
def report(distilled_example) -> Path:
    return distilled_example[2].parent / "report"


def test_the_same_smt2_files_are_emitted(report):
    produced = sorted(path.name for path in report.glob("*.smt2"))
    assert produced and all(name.startswith(("table-", "machine-")) for name in produced)
    if not REGENERATE:
        assert produced == sorted(path.name for path in GOLDEN.glob("*.smt2"))


@pytest.mark.parametrize("prefix", ["table-", "machine-"])
def test_smt2_files_match_their_golden_copies(report, prefix):
    paths = sorted(report.glob(f"{prefix}*.smt2"))
    assert paths
    for path in paths:
        _compare(path.name, path.read_bytes())


def test_summary_json_matches_its_golden_copy(report):
    _compare("summary.json", normalised_summary((report / "summary.json").read_bytes(), report))


def test_normalising_hides_only_the_varying_fields(report):
    """A changed number outside the times and paths still shows after normalising."""
    summary = (report / "summary.json").read_bytes()
    changed = summary.replace(b'"exact": ', b'"exact": 1', 1)
    assert normalised_summary(changed, report) != normalised_summary(summary, report)
