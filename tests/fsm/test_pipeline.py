"""distill_controller: what a failure half-way leaves behind, and what the certificate says about the run."""

import pytest

from certfsm import ArtifactError, load_spec
from certfsm import load_artifact
from certfsm.examples import example_spec_path
from certfsm.fsm import _pipeline, distill_controller


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def spec():
    return load_spec(example_spec_path("coadapt"))


@pytest.mark.slow
def test_a_crash_after_the_proofs_started_leaves_the_old_artifact_and_report(tmp_path, spec, monkeypatch):
    report = tmp_path / "report"
    report.mkdir()
    (report / "summary.json").write_text("old report")
    artifact = tmp_path / "old.cfsm"
    artifact.write_text("old artifact")

    def crash(*args, **kwargs):
        raise Crash

    monkeypatch.setattr(_pipeline, "prove_machine", crash)
    with pytest.raises(Crash):
        distill_controller(spec, out=artifact, report=report, jobs=1)
    assert artifact.read_text() == "old artifact"
    assert [p.name for p in report.iterdir()] == ["summary.json"] and (
        report / "summary.json"
    ).read_text() == "old report"
    # the checkpoint beside the artifact stays, so that the same call resumes; it never carries a proof
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.cfsm", "old.cfsm.checkpoint", "report"]


@pytest.mark.slow
def test_a_sampled_mismatch_makes_the_artifact_uncertified(tmp_path, spec, monkeypatch):
    real = _pipeline.sampled_cross_check

    def one_mismatch(*args, **kwargs):
        return {**real(*args, **kwargs), "mismatches": 1}

    monkeypatch.setattr(_pipeline, "sampled_cross_check", one_mismatch)
    run = distill_controller(spec, out=tmp_path / "c.cfsm", report=tmp_path / "r", jobs=1)
    assert not run.certified
    entry = next(e for e in run.certificate if e.property == "cells-exact")
    assert entry.verdict == "violated"
    assert not load_artifact(tmp_path / "c.cfsm", require_proved=False).is_certified
    with pytest.raises(ArtifactError, match=r"cells-exact"):
        load_artifact(tmp_path / "c.cfsm")


@pytest.mark.slow
def test_an_engine_contradiction_withdraws_the_enumeration_proof(tmp_path, spec, monkeypatch):
    real = _pipeline.disagreements
    monkeypatch.setattr(
        _pipeline,
        "disagreements",
        lambda z3, explicit: real(z3, explicit) + ["output-legal: z3 says proved, enumeration says violated"],
    )
    run = distill_controller(spec, out=tmp_path / "c.cfsm", report=tmp_path / "r", jobs=1)
    entry = next(e for e in run.certificate if e.property == "enumeration-output-legal")
    assert entry.verdict == "unknown" and not run.certified
    assert "output-legal: z3 says proved" in (tmp_path / "r" / "report.md").read_text()


def test_the_artifact_decoded_back_holds_the_table_the_proofs_covered(distilled_example, tmp_path):
    """Decode the written artifact into a Table, prove it again: the SMT-LIB files must be the report's, byte for
    byte apart from the solver time, so the certificate's table proofs are about the very table the artifact
    holds (and the decoded table equals the distilled one cell for cell)."""
    import re

    import numpy as np

    from certfsm import load_artifact
    from certfsm.fsm import CONSERVATIVE, EXACT
    from certfsm.fsm._grid import Grid
    from certfsm.fsm._table import Table, prove_table

    spec, run, artifact_path = distilled_example
    artifact = load_artifact(artifact_path)
    bits = 1 << np.arange(artifact.n_outputs)
    decoded = Table(
        Grid.from_spec(spec),
        artifact.proposal.reshape(-1),
        np.where(artifact.exact.reshape(-1), EXACT, CONSERVATIVE).astype(np.int8),
        (artifact.allowed.reshape(-1, 1) & bits) != 0,
    )
    table = run.distillation.table
    assert np.array_equal(decoded.proposal, table.proposal) and np.array_equal(decoded.allowed, table.allowed)
    assert np.array_equal(decoded.status == EXACT, table.status == EXACT)
    proofs = prove_table(decoded, spec, tmp_path)
    assert [proof.verdict for proof in proofs] == ["proved"] * len(proofs)
    seconds = re.compile(rb"^; seconds: .*$", re.M)
    for proof in proofs:
        name = f"{proof.property}.smt2"
        again = seconds.sub(b"", (tmp_path / name).read_bytes())
        assert again == seconds.sub(b"", (artifact_path.parent / "report" / name).read_bytes()), name


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"out": "x.json"}, r"^out='.*x\.json': an artifact file name ends in \.cfsm; give e\.g\. out='x\.cfsm'$"),
        (
            {"out": "x.cfsm", "samples": 10},
            r"^samples=10: the cross-check needs at least 100000 random inputs; "
            r"give samples=100000 or more$",
        ),
    ],
)
def test_the_library_refuses_bad_arguments_in_its_own_words(spec, tmp_path, kwargs, pattern):
    """The library names its parameters (out=, samples=), not the CLI's flags; nothing is written."""
    from certfsm import SpecError

    kwargs = {**kwargs, "out": tmp_path / kwargs["out"]}
    with pytest.raises(SpecError, match=pattern):
        distill_controller(spec, report=tmp_path / "report", **kwargs)
    assert list(tmp_path.iterdir()) == []
