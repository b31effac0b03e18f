"""Fixtures shared by the test folders."""

import importlib.resources
import json
import os
from pathlib import Path

import hypothesis
import pytest

import hypothesis_budget
from certfsm.examples import example_spec_path


def pytest_configure(config):
    """In the fast run (``-m "not slow"``) hypothesis tests draw fewer examples; the full run keeps them all.

    Tests that set no count of their own follow the "fast" profile; those that
    do pass it through `hypothesis_budget.examples`.
    """
    if (config.option.markexpr or "").strip() == "not slow":
        hypothesis_budget.fast = True
        hypothesis.settings.register_profile(
            "fast", max_examples=hypothesis_budget.examples(hypothesis.settings.default.max_examples)
        )
        hypothesis.settings.load_profile("fast")


@pytest.fixture
def spec_schema() -> dict:
    """The JSON Schema of the spec format as shipped (package data certfsm/spec.schema.json), a fresh copy."""
    return json.loads(importlib.resources.files("certfsm").joinpath("spec.schema.json").read_text(encoding="utf-8"))


@pytest.fixture
def example_spec_with(tmp_path):
    """Write a copy of the example spec with top-level fields changed to `tmp_path`/spec.json; returns its path.

    The copy names the shipped model by its absolute path, so a change to
    any other field is the only difference from the example.
    """

    def write(**changes):
        data = json.loads(example_spec_path("coadapt").read_text())
        data["model"] = str(example_spec_path("coadapt").parent / data["model"])
        data.update(changes)
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(data))
        return path

    return write


ACASXU = Path(
    os.environ.get("CERTFSM_ACASXU") or Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "acasxu"
)
"""The ACAS Xu benchmark, read in place: $CERTFSM_ACASXU, else ../shared/benchmarks/acasxu beside the checkout."""


@pytest.fixture(scope="session")
def acasxu() -> Path:
    """The ACAS Xu benchmark folder (onnx/, vnnlib/, instances.csv); the test is skipped with the reason when absent."""
    if not all((ACASXU / part).exists() for part in ("onnx", "vnnlib", "instances.csv")):
        pytest.skip(f"ACAS Xu benchmark not found at {ACASXU}; set CERTFSM_ACASXU to its folder")
    return ACASXU


@pytest.fixture(scope="session")
def distilled_example(tmp_path_factory):
    """The example distilled once per session through the pipeline: (spec, DistillRun, artifact path)."""
    from certfsm import load_spec
    from certfsm.fsm._pipeline import distill_controller

    folder = tmp_path_factory.mktemp("distilled-example")
    spec = load_spec(example_spec_path("coadapt"))
    run = distill_controller(spec, out=folder / "example.cfsm", report=folder / "report", jobs=1)
    return spec, run, folder / "example.cfsm"
