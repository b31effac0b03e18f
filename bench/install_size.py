"""Benchmark: the full toolkit install against the runtime-only install, side by side.

Builds two fresh virtual environments from this checkout, one with
`pip install .` (certfsm: verify, distill, export, the CLI) and one with
`pip install ./packaging/runtime` (certfsm-runtime: the runtime alone),
then measures in each:

- the size on disk of what the install added (site-packages, less what an
  empty venv already holds) and how many distributions it pulled in;
- the wall time of a fresh interpreter that imports `certfsm.runtime`
  and loads the example's certified artifact, the start-up a target pays
  on each boot, in rounds that alternate the two environments so load on
  the machine hits both alike; the median and the ratio full / runtime,
  pair by pair; the interpreter's own start-up (`python -c pass`) beside it.

The artifact is the example distilled once into a temporary folder by the
interpreter running this script (which needs the full toolkit).

    python bench/install_size.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
INSTALLS = {"certfsm (full)": ".", "certfsm-runtime": "packaging/runtime"}
LOAD = "import sys, certfsm.runtime as runtime; runtime.load(sys.argv[1])"


def _site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python*/site-packages")
    return found


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def _distributions(folder: Path) -> set[str]:
    return {path.name.split("-")[0].lower() for path in folder.glob("*.dist-info")}


def _make_env(folder: Path, source: str) -> tuple[Path, int, int, int]:
    """A venv with `source` installed: (its python, bytes added, distributions added, bytes of certfsm's own)."""
    venv.create(folder, with_pip=True)
    site = _site_packages(folder)
    empty_size, empty_dists = _size(site), _distributions(site)
    python = folder / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", REPOSITORY / source], check=True
    )
    return python, _size(site) - empty_size, len(_distributions(site) - empty_dists), _size(site / "certfsm")


def _wall(command: list) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    return time.perf_counter() - started


def _example_artifact(folder: Path) -> Path:
    from certfsm import load_spec
    from certfsm.examples import example_spec_path
    from certfsm.fsm import distill_controller

    out = folder / "example.cfsm"
    distill_controller(load_spec(example_spec_path("coadapt")), out=out, report=folder / "report", jobs=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="certfsm-install-") as scratch:
        scratch = Path(scratch)
        artifact = _example_artifact(scratch)
        envs = {name: _make_env(scratch / f"env{i}", source) for i, (name, source) in enumerate(INSTALLS.items())}
        loads = {name: [] for name in envs}
        starts = {name: [] for name in envs}
        for _ in range(args.rounds + 1):  # the first round warms the page cache and is dropped
            for name, (python, *_) in envs.items():
                starts[name].append(_wall([python, "-c", "pass"]))
                loads[name].append(_wall([python, "-c", LOAD, artifact]))
        full, light = INSTALLS
        ratios = [a / b for a, b in zip(loads[full][1:], loads[light][1:])]
        print(f"{args.rounds} rounds, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
        print(
            "| install | size on disk | of it certfsm's own | distributions | python -c pass "
            "| import certfsm.runtime + load |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for name, (_, size, count, own) in envs.items():
            print(
                f"| {name} | {size / 1e6:.1f} MB | {own / 1e6:.2f} MB | {count} "
                f"| {statistics.median(starts[name][1:]) * 1e3:.0f} ms "
                f"| {statistics.median(loads[name][1:]) * 1e3:.0f} ms |"
            )
        print(
            f"\nsize full / runtime: {envs[full][1] / envs[light][1]:.1f}x; "
            f"import + load full / runtime, median of pairs: {statistics.median(ratios):.2f}x "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
