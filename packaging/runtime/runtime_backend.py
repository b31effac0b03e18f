"""Build backend of `certfsm-runtime`: the runtime alone, built from the same sources as `certfsm`.

Why a second distribution and not a light `certfsm` with the toolkit as an
extra: a user who types `pip install certfsm` expects the tool the README
describes (verify, distill, export); only a target that runs certified
artifacts wants less. So `pip install certfsm` stays the whole toolkit and
`pip install ./packaging/runtime` (or the `certfsm-runtime` wheel) installs
the same import names, `certfsm.runtime`, `certfsm.sla`, `certfsm.machine`
and the core they need, as OpenCV ships `opencv-python-headless` beside
`opencv-python`. Install one or the other in an environment, not both.

What goes in is not a hand-kept list: `runtime_closure` follows every
import statement (at module level and inside functions) from the runtime's
entry modules through the certfsm sources, and the names that
`certfsm/__init__.py` loads lazily (its `_LAZY` table and its loader
functions) to their modules. A third-party import in that closure that is
not numpy or an optional extra of the runtime stops the build, so a new
dependency of the runtime cannot slip in unnoticed. The version is read
from the repository's pyproject.toml, its one home.

The hooks stage the closure with a generated pyproject.toml in a temporary
folder and hand that folder to setuptools.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path

from setuptools import build_meta

REPOSITORY = Path(__file__).resolve().parents[2]
ENTRY_MODULES = ("certfsm.runtime", "certfsm.sla", "certfsm.machine")
"""What a target imports; everything it needs is reached from these."""
LEFT_OUT = {"certfsm.examples": "the example controller's files belong to the toolkit (--probe example-trace)"}
"""Modules the closure reaches only on paths a target does not take; importing them names the full install."""
DEPENDENCIES = ("numpy>=1.26,<3",)
"""The artifact loader's arrays: the one third-party package the runtime needs."""
EXTRAS = {"sign": ("cryptography>=41",), "metrics": ("prometheus-client>=0.17",), "report": ("matplotlib>=3.7",)}
"""Optional features of the runtime, each imported only when used (trusted keys, --metrics-port, audit report)."""
_ALLOWED_THIRD_PARTY = {"numpy", "cryptography", "prometheus_client", "matplotlib"}


def _package_dirs() -> dict[str, Path]:
    """Import package -> source folder, from the repository's own setuptools table."""
    table = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {package: REPOSITORY / folder for package, folder in table.items()}


def _source_of(module: str, dirs: dict[str, Path]) -> Path | None:
    """The file that defines `module` (a package's __init__.py), or None when it is no certfsm module."""
    if module in dirs:
        return dirs[module] / "__init__.py"
    package, _, leaf = module.rpartition(".")
    if package in dirs:
        candidate = dirs[package] / f"{leaf}.py"
        return candidate if candidate.exists() else None
    return None


def _lazy_names(init: Path) -> dict[str, set[str]]:
    """certfsm/__init__.py: public name -> the core modules importing that name loads."""
    tree = ast.parse(init.read_text())
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            for name, module in ast.literal_eval(node.value).items():
                names.setdefault(name, set()).add(f"certfsm.{module}")
        if isinstance(node, ast.FunctionDef):  # a loader function: _core("_module") imports its home on call
            names.setdefault(node.name, set()).update(
                f"certfsm.{inner.args[0].value}"
                for inner in ast.walk(node)
                if isinstance(inner, ast.Call)
                and getattr(inner.func, "id", None) == "_core"
                and inner.args
                and isinstance(inner.args[0], ast.Constant)
            )
    return names


def _imports(path: Path, module: str, is_package: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Every import of the file as (absolute module, names imported from it), at any depth.

    Only the module-level ones of certfsm/__init__.py: its loader functions import their modules when
    called, and `_lazy_names` follows them only for the names the runtime imports.
    """
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if module == "certfsm" else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.append((target, tuple(alias.name for alias in node.names)))
    return found


def runtime_closure() -> tuple[dict[str, Path], set[str]]:
    """(certfsm module -> its source file, third-party top-level packages imported) reached from ENTRY_MODULES."""
    dirs = _package_dirs()
    lazy = _lazy_names(dirs["certfsm"] / "__init__.py")
    modules: dict[str, Path] = {}
    third_party: set[str] = set()
    pending = list(ENTRY_MODULES)
    while pending:
        module = pending.pop()
        if module in modules or module in LEFT_OUT:
            continue
        source = _source_of(module, dirs)
        if source is None:
            raise RuntimeError(f"{module} is imported by the runtime but has no source under {REPOSITORY}")
        modules[module] = source
        parent = module.rpartition(".")[0]
        if parent.startswith("certfsm"):
            pending.append(parent)
        for target, names in _imports(source, module, source.name == "__init__.py"):
            top = target.partition(".")[0]
            if top != "certfsm":
                if top not in sys.stdlib_module_names:
                    third_party.add(top)
                continue
            pending.append(target)
            for name in names:
                if _source_of(f"{target}.{name}", dirs) is not None:
                    pending.append(f"{target}.{name}")
                elif target == "certfsm":
                    pending.extend(lazy.get(name, ()))
    unexpected = third_party - _ALLOWED_THIRD_PARTY
    if unexpected:
        raise RuntimeError(
            f"the runtime now imports {', '.join(sorted(unexpected))}; add it to DEPENDENCIES or "
            "EXTRAS of packaging/runtime/runtime_backend.py, or keep it out of the runtime"
        )
    return modules, third_party


def _pyproject(version: str, packages: list[str]) -> str:
    extras = "\n".join(f"{name} = {list(requirements)!r}" for name, requirements in EXTRAS.items())
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "certfsm-runtime"
version = "{version}"
description = "The certfsm runtime alone: load and run certified .cfsm artifacts, with audit log and SLA monitor"
readme = "README.md"
requires-python = ">=3.11"
license = {{ text = "Apache-2.0" }}
dependencies = {list(DEPENDENCIES)!r}

[project.optional-dependencies]
{extras}

[tool.setuptools]
packages = {packages!r}
"""


@contextmanager
def _staged():
    """A temporary project folder holding the closure under certfsm/, with its pyproject.toml; cwd while open."""
    version = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["version"]
    modules, _ = runtime_closure()
    with tempfile.TemporaryDirectory(prefix="certfsm-runtime-") as folder:
        stage = Path(folder)
        for module, source in modules.items():
            parts = module.split(".")
            target = (
                stage.joinpath(*parts, "__init__.py")
                if source.name == "__init__.py"
                else stage.joinpath(*parts[:-1], f"{parts[-1]}.py")
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        shutil.copyfile(Path(__file__).with_name("README.md"), stage / "README.md")
        packages = sorted(module for module, source in modules.items() if source.name == "__init__.py")
        (stage / "pyproject.toml").write_text(_pyproject(version, packages))
        here = os.getcwd()
        os.chdir(stage)
        try:
            yield stage
        finally:
            os.chdir(here)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    target = os.path.abspath(metadata_directory)  # before the hook moves into the staged folder
    with _staged():
        return build_meta.prepare_metadata_for_build_wheel(target, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    target = os.path.abspath(wheel_directory)
    with _staged():
        return build_meta.build_wheel(target, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    target = os.path.abspath(sdist_directory)
    with _staged():
        return build_meta.build_sdist(target, config_settings)
