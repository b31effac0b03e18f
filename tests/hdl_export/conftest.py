"""Fixtures the hardware-export tests share."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli
from made_once import made_once_per_run

from certfsm.examples import example_spec_path


@pytest.fixture(scope="session")
def artifact_without_frac_bits(tmp_path_factory):
    """The example distilled from a spec whose temperature input has no frac_bits: certified, but not exportable.

    Made once per run for every worker (tests only read it)."""

    def make(folder):
        spec = json.loads(example_spec_path("coadapt").read_text())
        spec["model"] = str(example_spec_path("coadapt").parent / spec["model"])
        del spec["inputs"][3]["frac_bits"]
        (folder / "spec.json").write_text(json.dumps(spec))
        code, out, err = run_cli(
            "distill",
            folder / "spec.json",
            "--out",
            folder / "c.cfsm",
            "--report",
            folder / "report",
            "--jobs",
            "1",
            "--no-progress",
        )
        assert code == 0, out + err

    return made_once_per_run(tmp_path_factory, "no-frac-bits", make) / "c.cfsm"
