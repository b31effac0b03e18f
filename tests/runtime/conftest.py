"""Artifacts for hot swaps: the example's spec and network on coarser grids, and one of another layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from certfsm.examples import example_spec_path

COARSE_EDGES = {
    "compute_util": [0, 50, 100],
    "mem_bw_util": [0, 50, 100],
    "l2_miss_rate": [0, 100],
    "temperature": [20, 85, 110],
    "queue_depth": [0, 56, 64],
}
"""16 cells (the example has 7 200); the rule edges (85 degC, 56 requests) stay, so the allowed masks are the same
function of the reading. Every edge is on its input's fixed-point grid."""


def distil_example_variant(folder: Path, edges: dict, rename: dict | None = None) -> Path:
    """The example's spec with other bin edges (and inputs renamed), distilled with the example's network."""
    from certfsm import load_spec
    from certfsm.fsm import distill_controller

    data = json.loads(example_spec_path("coadapt").read_text())
    data["model"] = str(example_spec_path("coadapt").parent / data["model"])
    for item in data["inputs"]:
        item["edges"] = edges[item["name"]]
    for old, new in (rename or {}).items():
        next(item for item in data["inputs"] if item["name"] == old)["name"] = new
        for rule in data["legality_rules"]:
            if old in rule["when"]:
                rule["when"][new] = rule["when"].pop(old)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(data))
    run = distill_controller(
        load_spec(folder / "spec.json"), out=folder / "variant.cfsm", report=folder / "report", jobs=1
    )
    assert run.certified
    return folder / "variant.cfsm"


@pytest.fixture(scope="session")
def coarse_example(tmp_path_factory) -> Path:
    """The example's spec on a 16-cell grid, certified (distils in about a second)."""
    return distil_example_variant(tmp_path_factory.mktemp("coarse-example"), COARSE_EDGES)


@pytest.fixture(scope="session")
def renamed_example(tmp_path_factory) -> Path:
    """A certified artifact of another layout: the coarse spec with queue_depth called queue_len."""
    return distil_example_variant(
        tmp_path_factory.mktemp("renamed-example"), COARSE_EDGES, rename={"queue_depth": "queue_len"}
    )
