"""House rules that hold for the whole code base: no package reaches into another package's private rooms.

The packages are the folders `certfsm/` (the core, import name
`certfsm`), `verify/` (`certfsm.verify`), `fsm/`, `runtime/`, `sla/` and
`hdl_export/`, plus the `bench/` scripts. A module may import its own
package's underscore modules; from any other package it imports only
public names (the package's `__init__` exports them, the core's lazily).
Why: an underscore module is free to change under its package's own
tests; a reach from outside turns that freedom into a silent break, and
makes the next capability pick the private door instead of the public one.

The check reads the source (`ast`), so it sees every import, including
those inside functions, relative ones, `importlib.import_module("...")`
with a literal name and attribute chains such as `certfsm.verify._split.x`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FOLDERS = {"certfsm": "certfsm", "verify": "certfsm.verify", "fsm": "certfsm.fsm", "runtime": "certfsm.runtime",
           "sla": "certfsm.sla", "hdl_export": "certfsm.hdl_export", "bench": "bench"}
"""Each production folder and the import name of its package."""

SUB_PACKAGES = {"verify", "fsm", "runtime", "sla", "hdl_export"}
"""The packages that live under the `certfsm.` import namespace (everything else there is the core)."""


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def owner(module: str) -> tuple[str, list[str]] | None:
    """The package that owns the dotted `module` name and the parts below it; None outside certfsm and bench."""
    parts = module.split(".")
    if parts[0] == "bench":
        return "bench", parts[1:]
    if parts[0] != "certfsm":
        return None
    if len(parts) > 1 and parts[1] in SUB_PACKAGES:
        return f"certfsm.{parts[1]}", parts[2:]
    return "certfsm", parts[1:]


def _resolve(module_name: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of a relative import `from .<level> target import ...` in `module_name`."""
    base = module_name.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def private_reaches(source: str, module_name: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, what) for every import in `source` of another package's underscore module or underscore name.

    `module_name` is the dotted name of the module the source belongs to
    (`certfsm.fsm._grid`); `is_package` says it is a package's `__init__`.
    """
    home = owner(module_name)[0]
    found: list[tuple[int, str]] = []

    def judge(line: int, module: str, names: tuple[str, ...] = ()) -> None:
        owned = owner(module)
        if owned is None or owned[0] == home:
            return
        package, below = owned
        if any(_is_private(part) for part in below):
            found.append((line, f"imports {module}, a private module of {package}"))
        for name in names:
            if _is_private(name):
                found.append((line, f"imports {name} from {module}, a private name of {package}"))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                judge(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = node.module if not node.level else _resolve(module_name, is_package, node.level, node.module)
            judge(node.lineno, module, tuple(alias.name for alias in node.names))
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module"):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                judge(node.lineno, node.args[0].value)
        elif isinstance(node, ast.Attribute):
            parts = (_dotted(node) or "").split(".")
            private = [k for k, part in enumerate(parts) if _is_private(part)]
            if parts[0] == "certfsm" and private:
                judge(node.lineno, ".".join(parts[:private[0] + 1]))
    return sorted(set(found))


def production_files() -> list[tuple[Path, str, bool]]:
    """(path, module name, is a package __init__) of every production .py file."""
    files = []
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(ROOT / folder).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            files.append((path, ".".join(parts[:-1] if is_package else parts), is_package))
    return files


@pytest.mark.slow
def test_no_module_imports_another_packages_private_modules_or_names():
    files = production_files()
    assert len(files) > 50, "the production folders were not found"
    offences = []
    for path, module_name, is_package in files:
        for line, what in private_reaches(path.read_text(), module_name, is_package=is_package):
            offences.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offences, "use the package's public names instead:\n" + "\n".join(offences)


PLANTED = [
    ("from certfsm.verify import _split\n", "certfsm.fsm._cell_bounds", "_split from certfsm.verify"),
    ("from certfsm._errors import SpecError\n", "certfsm.sla._path", "certfsm._errors, a private module of certfsm"),
    ("import certfsm.verify._split as s\n", "certfsm.fsm._x", "certfsm.verify._split"),
    ("def f():\n    from certfsm._spec import load_spec\n", "bench.distill", "certfsm._spec"),
    ("from .._network import Network\n", "certfsm.verify._bounds", "certfsm._network"),
    ("from ..verify import _check\n", "certfsm.fsm", "_check from certfsm.verify"),
    ("import importlib\nimportlib.import_module('certfsm.fsm._table')\n", "certfsm.runtime._x", "certfsm.fsm._table"),
    ("import certfsm\nx = certfsm._spec.load_spec\n", "certfsm.sla._x", "certfsm._spec"),
    ("from certfsm import _staging\n", "certfsm.runtime._report", "_staging from certfsm"),
]


@pytest.mark.parametrize("source, module_name, expected", PLANTED, ids=[row[2] for row in PLANTED])
def test_a_planted_reach_is_found_with_its_line(source, module_name, expected):
    found = private_reaches(source, module_name, is_package=module_name == "certfsm.fsm")
    assert found and expected in found[-1][1], found
    assert found[-1][0] == source.count("\n")


ALLOWED = [
    ("from ._split import bound\nfrom . import _split\n", "certfsm.verify._check"),
    ("from .._errors import SpecError\n", "certfsm.examples"),
    ("from certfsm._spec import load_spec\n", "certfsm.cli"),
    ("from certfsm import SpecError, Network\nfrom certfsm.verify import check\n", "certfsm.fsm._x"),
    ("import certfsm\nprint(certfsm.__file__)\n", "certfsm.runtime._x"),
    ("from certfsm.fsm import _cell_bounds\n", "certfsm.fsm._cell_workers"),
]


@pytest.mark.parametrize("source, module_name", ALLOWED, ids=[row[1] for row in ALLOWED])
def test_imports_inside_a_package_and_of_public_names_pass(source, module_name):
    assert private_reaches(source, module_name, is_package=module_name == "certfsm.examples") == []
