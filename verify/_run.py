"""The two verification jobs a user starts: a controller spec, and a VNN-LIB instance.

Both load their inputs first (so bad input fails before any solver runs
and before anything is written), check each property through the one
entry point `check`, and hand the results to the report writer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ._property import Property
from ._result import PROVED, UNKNOWN, VIOLATED, Result


@dataclass(frozen=True)
class VerifyRun:
    """Everything a verification produced, in property order."""

    network: object
    properties: list[Property]
    results: list[Result]
    seconds: float

    @property
    def verdicts(self) -> list[str]:
        return [r.verdict for r in self.results]


def check_all(network, properties, *, engine, timeout, jobs, on_progress=None) -> VerifyRun:
    """Check each property in turn; `on_progress(index, fraction, message)` follows the work."""
    from ._check import check

    started = time.perf_counter()
    results = []
    for index, prop in enumerate(properties):

        def progress(fraction, message, index=index):
            if on_progress:
                on_progress(index, fraction, message)

        results.append(check(network, prop, engine=engine, timeout=timeout, jobs=jobs, progress=progress))
        if on_progress:
            on_progress(index, 1.0, results[-1].verdict)
    return VerifyRun(network, list(properties), results, time.perf_counter() - started)


def verify_spec(spec, *, engine="auto", timeout=60.0, jobs=None, on_progress=None) -> VerifyRun:
    """Load the spec's model and check the spec's token-range and legality properties."""
    from certfsm import load_onnx

    from ._spec_properties import spec_properties

    network = load_onnx(spec.model_path)
    check_network_fits_spec(network, spec)
    return check_all(network, spec_properties(spec), engine=engine, timeout=timeout, jobs=jobs, on_progress=on_progress)


def check_network_fits_spec(network, spec) -> None:
    from certfsm import SpecError

    if network.n_inputs != spec.n_inputs:
        raise SpecError(
            f"{spec.path}: model {Path(spec.model_path).name} takes {network.n_inputs} inputs "
            f"but the spec declares {spec.n_inputs} in inputs[]; make inputs[] match the model"
        )
    if network.n_outputs != spec.n_outputs:
        raise SpecError(
            f"{spec.path}: model {Path(spec.model_path).name} gives {network.n_outputs} outputs "
            f"but the spec maps {spec.n_outputs} in outputs[]; list one token per model output"
        )


def vnncomp_answer(results: list[Result]) -> str:
    """VNN-COMP's word for a property split into several input boxes.

    sat as soon as one box is violated; unsat only when every box is proved;
    timeout when what is missing ran out of time; unknown otherwise.
    """
    if any(r.verdict == VIOLATED for r in results):
        return "sat"
    if results and all(r.verdict == PROVED for r in results):
        return "unsat"
    open_results = [r for r in results if r.verdict == UNKNOWN]
    if open_results and all("timeout" in r.reason.lower() or "timed out" in r.reason.lower() for r in open_results):
        return "timeout"
    return "unknown"


def vnncomp_result(run: VerifyRun) -> tuple[str, str]:
    """(answer, result-file text) of a VNN-LIB run, in VNN-COMP's words (`vnncomp_answer`).

    The text is what VNN-COMP's result file holds (no trailing newline):
    the answer alone, or ``sat`` followed by the witness of the first
    violated input box. `certfsm vnnlib` and `vnnlib-batch` both write it
    through here, so a batch row means what the single command prints.
    """
    from ._vnnlib import format_vnncomp_result

    answer = vnncomp_answer(run.results)
    witness = next((r for r in run.results if r.verdict == VIOLATED), None)
    if witness is None:
        return answer, format_vnncomp_result(answer)
    return answer, format_vnncomp_result(answer, witness.counterexample, witness.outputs)


def verify_vnnlib(onnx_path, vnnlib_path, *, engine="auto", timeout=116.0, jobs=None, on_progress=None) -> VerifyRun:
    """Check one VNN-LIB instance; the timeout covers the whole instance."""
    from certfsm import load_onnx

    from ._vnnlib import parse_vnnlib

    network = load_onnx(onnx_path)
    properties = parse_vnnlib(vnnlib_path, n_inputs=network.n_inputs, n_outputs=network.n_outputs)
    started = time.perf_counter()
    results = []
    for index, prop in enumerate(properties):
        remaining = timeout - (time.perf_counter() - started)
        if remaining <= 0:
            results.append(Result(UNKNOWN, engine, 0.0, reason="timeout before this input box was checked"))
            continue
        run = check_all(
            network,
            [prop],
            engine=engine,
            timeout=remaining,
            jobs=jobs,
            on_progress=(lambda i, f, m, index=index: on_progress(index, f, m)) if on_progress else None,
        )
        results.append(run.results[0])
        if results[-1].verdict == VIOLATED:
            break
    return VerifyRun(network, properties[: len(results)], results, time.perf_counter() - started)
