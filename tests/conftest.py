"""Fixtures shared by the test folders."""

import json

import pytest

from certfsm.examples import example_spec_path


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
