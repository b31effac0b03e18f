"""Fixtures the hardware-export tests share."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

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


def _module_of(path, name: str):
    """A helper module of another test folder, loaded by its path (that folder is not on sys.path here)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def refined_coarse_artifact(tmp_path_factory):
    """The example on the runtime tests' 16-cell grid, certified, then most cells refined at random into box trees
    (`tests/runtime/refined_tables.refined_artifact`): a small refined artifact that every export reads.

    Made once per run for every worker (tests only read it)."""
    runtime = Path(__file__).parents[1] / "runtime"
    variants = _module_of(runtime / "conftest.py", "certfsm_runtime_test_grids")
    tables = _module_of(runtime / "refined_tables.py", "certfsm_refined_tables")

    def make(folder):
        flat = variants.distil_example_variant(folder / "flat", variants.COARSE_EDGES)
        tables.refined_artifact(flat, folder / "refined.cfsm", seed=2, share=0.4)

    return made_once_per_run(tmp_path_factory, "refined-coarse", make) / "refined.cfsm"
