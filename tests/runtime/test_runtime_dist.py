"""certfsm-runtime (packaging/runtime): the runtime alone, and the same decisions as the full install.

The closure tests are fast: they read the sources. The wheel test builds
the distribution, installs it into a bare folder and runs the example's
certified machine there in a fresh interpreter that sees only the
standard library, numpy and that folder; its decisions must equal the
full install's, cycle by cycle.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
BACKEND = REPOSITORY / "packaging" / "runtime" / "runtime_backend.py"


@pytest.fixture(scope="module")
def backend():
    spec = importlib.util.spec_from_file_location("runtime_backend", BACKEND)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_runtime_closure_leaves_the_toolkit_out(backend):
    modules, third_party = backend.runtime_closure()
    assert {"certfsm.runtime", "certfsm.sla", "certfsm.machine", "certfsm._artifact"} <= set(modules)
    toolkit = [
        m
        for m in modules
        if m.startswith(("certfsm.verify", "certfsm.fsm", "certfsm.hdl_export", "certfsm.examples"))
        or m in ("certfsm.cli", "certfsm._onnx")
    ]
    assert toolkit == []
    assert third_party <= {"numpy", "cryptography", "prometheus_client", "matplotlib"}
    assert "numpy" in third_party


@pytest.mark.slow
def test_a_new_third_party_import_of_the_runtime_stops_the_build(backend, monkeypatch):
    monkeypatch.setattr(backend, "ENTRY_MODULES", backend.ENTRY_MODULES + ("certfsm.cli",))
    with pytest.raises(RuntimeError, match="typer"):
        backend.runtime_closure()


_RUN_EXAMPLE = """
import json, sys
import certfsm.runtime as runtime
from certfsm.runtime._run import run
from certfsm.runtime._probes_trace import TraceProbe
artifact, trace = sys.argv[1], sys.argv[2]
seen = []
controller = runtime.load(artifact, record=lambda decision, *rest: seen.append([decision.token, decision.reason.value]))
run(controller, TraceProbe(trace, controller.machine.names), on_refused=None)
import certfsm
outside = sorted({name.partition(".")[0] for name in sys.modules} - set(sys.stdlib_module_names) - {"certfsm", "numpy", "__main__"})
try:
    certfsm.load_spec("spec.json")
    toolkit = "imported"
except ImportError as error:
    toolkit = str(error)
print(json.dumps({"decisions": seen, "certfsm": certfsm.__file__, "outside": outside, "toolkit": toolkit}))
"""


@pytest.mark.slow
def test_the_runtime_wheel_runs_the_example_alone_and_decides_as_the_full_install(distilled_example, tmp_path):
    from certfsm.examples import example_trace_path

    _, _, artifact = distilled_example
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", wheels, REPOSITORY / "packaging" / "runtime"],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("certfsm_runtime-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", target, wheel], check=True, capture_output=True)

    numpy_site = Path(numpy.__file__).parents[1]
    environment = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{target}{os.pathsep}{numpy_site}"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", _RUN_EXAMPLE, artifact, example_trace_path()],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    alone = json.loads(done.stdout)

    import certfsm.runtime as runtime
    from certfsm.runtime._probes_trace import TraceProbe
    from certfsm.runtime._run import run

    full = []
    controller = runtime.load(
        artifact, record=lambda decision, *rest: full.append([decision.token, decision.reason.value])
    )
    run(controller, TraceProbe(example_trace_path(), controller.machine.names), on_refused=None)

    assert Path(alone["certfsm"]).is_relative_to(target)
    assert alone["outside"] == []
    assert "pip install certfsm" in alone["toolkit"]
    assert len(full) > 100 and alone["decisions"] == full
