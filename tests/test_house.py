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
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FOLDERS = {
    "certfsm": "certfsm",
    "verify": "certfsm.verify",
    "fsm": "certfsm.fsm",
    "runtime": "certfsm.runtime",
    "sla": "certfsm.sla",
    "hdl_export": "certfsm.hdl_export",
    "cli": "certfsm.cli",
    "checker": "certfsm.checker",
    "bench": "bench",
}
"""Each production folder and the import name of its package."""

SUB_PACKAGES = {"verify", "fsm", "runtime", "sla", "hdl_export", "cli", "checker"}
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
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def imports_in(
    source: str, module_name: str, *, is_package: bool = False, top_level_only: bool = False
) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module, names taken from it) for every import in `source`, function-level ones included.

    `importlib.import_module("...")` with a literal name and attribute chains
    such as `certfsm.verify._split.x` count as imports of that module.
    With `top_level_only`, only the statements that run when the module is
    imported (module level, not inside a function, class or
    ``if TYPE_CHECKING``): the imports that can form a cycle.
    """
    tree = ast.parse(source)
    nodes = _top_level(tree) if top_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module if not node.level else _resolve(module_name, is_package, node.level, node.module)
            found.append((node.lineno, module, tuple(alias.name for alias in node.names)))
        elif top_level_only:
            continue
        elif isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module"):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value, ()))
        elif isinstance(node, ast.Attribute):
            parts = (_dotted(node) or "").split(".")
            private = [k for k, part in enumerate(parts) if _is_private(part)]
            if parts[0] == "certfsm" and private:
                found.append((node.lineno, ".".join(parts[: private[0] + 1]), ()))
    return found


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, with the bodies of plain ifs and trys (not TYPE_CHECKING blocks)."""
    statements, queue = [], list(tree.body)
    while queue:
        node = queue.pop(0)
        statements.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            queue += [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            queue += [
                *node.body,
                *(h for handler in node.handlers for h in handler.body),
                *node.orelse,
                *node.finalbody,
            ]
    return statements


def private_reaches(
    source: str, module_name: str, *, is_package: bool = False, closed: set[str] | None = None
) -> list[tuple[int, str]]:
    """(line, what) for every import in `source` of another package's underscore module or underscore name.

    `module_name` is the dotted name of the module the source belongs to
    (`certfsm.fsm._grid`); `is_package` says it is a package's `__init__`;
    `closed`, when given, the packages whose private rooms count (default: every package).
    """
    home = (owner(module_name) or (None,))[0]
    found: list[tuple[int, str]] = []
    for line, module, names in imports_in(source, module_name, is_package=is_package):
        owned = owner(module)
        if owned is None or owned[0] == home or (closed is not None and owned[0] not in closed):
            continue
        package, below = owned
        if any(_is_private(part) for part in below):
            found.append((line, f"imports {module}, a private module of {package}"))
        for name in names:
            if _is_private(name):
                found.append((line, f"imports {name} from {module}, a private name of {package}"))
    return sorted(set(found))


FLOORS = {
    "certfsm": 0,
    "certfsm.verify": 1,
    "certfsm.sla": 1,
    "certfsm.checker": 1,
    "certfsm.fsm": 2,
    "certfsm.runtime": 2,
    "certfsm.hdl_export": 3,
    "certfsm.cli": 4,
}
"""The floors of the house (docs/design.md, "Layout"): a package imports only packages on lower floors. The
core holds the IRs and their codecs; the CLI, on top, parses, calls one public function per command and prints."""


def upward_imports(source: str, module_name: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, what) for every import in `source` of a package on the same floor or a higher one than its own."""
    home = owner(module_name)[0]
    if home not in FLOORS:
        return []
    found = []
    for line, module, names in imports_in(source, module_name, is_package=is_package):
        targets = {owner(module)[0]} if owner(module) else set()
        if module == "certfsm":  # from certfsm import verify
            targets |= {f"certfsm.{name}" for name in names if name in SUB_PACKAGES}
        for target in targets - {home, None}:
            if target in FLOORS and FLOORS[target] >= FLOORS[home]:
                found.append((line, f"imports {target} (floor {FLOORS[target]}) from {home} (floor {FLOORS[home]})"))
    return sorted(set(found))


def import_cycle(modules: dict[str, tuple[str, bool]]) -> list[str]:
    """One cycle of module-level imports among `modules` (name -> (source, is package)), or [] when none.

    An import of one of the module's own packages is no edge: a package is imported before its modules.
    """
    graph = {}
    for name, (source, is_package) in modules.items():
        edges = set()
        for _, module, names in imports_in(source, name, is_package=is_package, top_level_only=True):
            edges |= {f"{module}.{n}" for n in names if f"{module}.{n}" in modules}
            if module in modules:
                edges.add(module)
        ancestors = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
        graph[name] = edges - {name} - ancestors  # Python imports a module's packages before the module itself
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for successor in sorted(graph[name]):
            if state.get(successor) == 1:
                return path[path.index(successor) :] + [successor]
            if successor not in state and (cycle := visit(successor)):
                return cycle
        state[name] = 2
        path.pop()
        return []

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)):
            return cycle
    return []


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
def test_no_package_imports_one_on_its_own_floor_or_above():
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path, module_name, is_package in production_files()
        for line, what in upward_imports(path.read_text(), module_name, is_package=is_package)
    ]
    assert not offences, "a package may import only lower floors (FLOORS):\n" + "\n".join(offences)


@pytest.mark.slow
def test_no_import_cycle_at_module_level():
    modules = {name: (path.read_text(), is_package) for path, name, is_package in production_files()}
    cycle = import_cycle(modules)
    assert not cycle, "module-level import cycle: " + " -> ".join(cycle)


UPWARD = [
    ("def f():\n    from certfsm.fsm import distill_controller\n", "certfsm._spec", "certfsm.fsm (floor 2)"),
    ("from certfsm import runtime\n", "certfsm._x", "certfsm.runtime (floor 2)"),
    ("from certfsm.hdl_export import export_c\n", "certfsm.fsm._x", "certfsm.hdl_export (floor 3)"),
    ("import certfsm.cli\n", "certfsm.hdl_export._x", "certfsm.cli (floor 4)"),
    ("from certfsm.sla import SlaMonitor\n", "certfsm.verify._x", "certfsm.sla (floor 1)"),
]


@pytest.mark.parametrize("source, module_name, expected", UPWARD, ids=[row[2] for row in UPWARD])
def test_a_planted_upward_import_is_found_with_its_line(source, module_name, expected):
    found = upward_imports(source, module_name)
    assert found and expected in found[-1][1], found
    assert found[-1][0] == source.count("\n")


def test_downward_imports_pass():
    assert upward_imports("from certfsm import Network\nfrom certfsm.verify import check\n", "certfsm.fsm._x") == []
    assert upward_imports("from certfsm.sla import SlaMonitor\n", "certfsm.runtime._x") == []
    assert upward_imports("from certfsm.hdl_export import export_c\n", "certfsm.cli") == []


def test_a_planted_cycle_is_found_and_a_function_level_import_breaks_it():
    cycle = {"certfsm._a": ("from ._b import x\n", False), "certfsm._b": ("from certfsm._a import y\n", False)}
    assert import_cycle(cycle) == ["certfsm._a", "certfsm._b", "certfsm._a"]
    broken = {**cycle, "certfsm._b": ("def f():\n    from certfsm._a import y\n", False)}
    assert import_cycle(broken) == []


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
    ("from certfsm import SpecError, Network\nfrom certfsm.verify import check\n", "certfsm.fsm._x"),
    ("import certfsm\nprint(certfsm.__file__)\n", "certfsm.runtime._x"),
    ("from certfsm.fsm import _cell_bounds\n", "certfsm.fsm._cell_workers"),
]


@pytest.mark.parametrize("source, module_name", ALLOWED, ids=[row[1] for row in ALLOWED])
def test_imports_inside_a_package_and_of_public_names_pass(source, module_name):
    assert private_reaches(source, module_name, is_package=module_name == "certfsm.examples") == []


# ---------------------------------------------------------------- tests

TEST_FOLDERS = {
    "core": "certfsm",
    "verify": "certfsm.verify",
    "fsm": "certfsm.fsm",
    "runtime": "certfsm.runtime",
    "sla": "certfsm.sla",
    "hdl_export": "certfsm.hdl_export",
    "cli": "certfsm.cli",
    "checker": "certfsm.checker",
}
"""Each package's test folder under tests/ and the package whose private modules its tests (and the helper
modules beside them) may import."""

SUB_PACKAGE_NAMES = {f"certfsm.{name}" for name in SUB_PACKAGES}


def test_reaches(source: str, package: str | None) -> list[tuple[int, str]]:
    """(line, what) for every import in a test of `package` of another package's underscore module or name.

    A package's own tests may open its underscore modules, knowingly: they test what the public names are made
    of. Every other package's rooms, the core's included, stay as closed to them as to its code, so that a
    package can rework its insides under its own tests alone.

    `package` None is a module at the top of tests/ (the twin registry of test_decoders.py, the seams, the
    fixtures and helpers). Those check twins that live in several sub-packages against each other, so the
    sub-packages' underscore modules stay open to them; the core's stay closed, since the core exports what
    they need (its errors, loaders and writer by name, its twins as the public modules `certfsm.machine`
    and `certfsm.fast_binning`), and a top-level module that needs a core insides is a core test and
    belongs in tests/core.
    """
    if package is None:
        return private_reaches(source, "tests.test_module", closed={"certfsm"})
    return private_reaches(source, f"{package}.test_module", closed=SUB_PACKAGE_NAMES | {"certfsm"})


test_reaches.__test__ = False  # a helper, not a test


def package_test_files() -> list[tuple[Path, str | None]]:
    """(path, the package it tests) of every module in a package's test folder; None for the modules at the
    top of tests/."""
    return [
        (path, package)
        for folder, package in TEST_FOLDERS.items()
        for path in sorted((ROOT / "tests" / folder).rglob("*.py"))
    ] + [(path, None) for path in sorted((ROOT / "tests").glob("*.py"))]


@pytest.mark.slow
def test_no_test_imports_another_packages_private_modules_or_names():
    files = package_test_files()
    assert len(files) > 50, "the test folders were not found"
    assert any(package is None for _, package in files), "the modules at the top of tests/ were not found"
    offences = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path, package in files
        for line, what in test_reaches(path.read_text(), package)
    ]
    assert not offences, (
        "a test imports its own package's private modules only; use the other package's public names:\n"
        + "\n".join(offences)
    )


TEST_REACHES = [
    ("from certfsm.verify._smtlib import read_header\n", "certfsm.fsm", "certfsm.verify._smtlib"),
    ("def t():\n    from certfsm.cli import _flag_words\n", "certfsm", "_flag_words from certfsm.cli"),
    ("import certfsm.fsm._table\n", "certfsm.hdl_export", "certfsm.fsm._table"),
    ("from certfsm.runtime import _blob\n", "certfsm.sla", "_blob from certfsm.runtime"),
    ("from certfsm._errors import SpecError\n", "certfsm.fsm", "certfsm._errors, a private module of certfsm"),
    ("def t():\n    from certfsm import _version\n", "certfsm.cli", "_version from certfsm"),
    ("import certfsm\nx = certfsm._canonical.sha256_hex\n", "certfsm.runtime", "certfsm._canonical"),
    ("from certfsm._onnx import to_onnx\n", None, "certfsm._onnx, a private module of certfsm"),
]


@pytest.mark.parametrize("source, package, expected", TEST_REACHES, ids=[row[2] for row in TEST_REACHES])
def test_a_planted_reach_in_a_test_is_found_with_its_line(source, package, expected):
    found = test_reaches(source, package)
    assert found and expected in found[-1][1], found
    assert found[-1][0] == source.count("\n")


def test_a_test_may_open_its_own_packages_private_modules():
    assert test_reaches("from certfsm.fsm._grid import Grid\nfrom certfsm.fsm import _table\n", "certfsm.fsm") == []
    assert test_reaches("from certfsm.verify import check\nimport certfsm.machine\n", "certfsm.fsm") == []
    assert test_reaches("from certfsm.cli import _flag_words\n", "certfsm.cli") == []
    assert test_reaches("from certfsm._artifact import _build\nfrom certfsm import _version\n", "certfsm") == []


def test_a_module_at_the_top_of_tests_may_open_the_sub_packages_but_not_the_core():
    assert test_reaches("from certfsm.runtime._blob import BlobLayout\nfrom certfsm import SpecError\n", None) == []
    assert test_reaches("from certfsm.hdl_export._vectors import Cycle\nimport certfsm.machine\n", None) == []
    assert test_reaches("from certfsm import _staging\n", None) == [
        (1, "imports _staging from certfsm, a private name of certfsm")
    ]


# ---------------------------------------------------------------- public surfaces

SURFACES = ("certfsm", "certfsm.verify", "certfsm.fsm", "certfsm.runtime", "certfsm.sla", "certfsm.hdl_export")
"""The packages whose `__all__` holds only names used outside them (the test below): the core and the sub-packages
(the CLI exports only `main`, for its entry point)."""

USER_DOCUMENTS = ("README.md", "docs", "packaging")
"""Where users read the public names: every .md file here counts as a use of the names it writes out."""

FOR_USERS = {
    ("certfsm", "AffineLayer"): "what the public Network is made of: a user builds a Network from its layers",
    ("certfsm", "SigningError"): "what generate_key_pair, load_private_key and sign_artifact raise; users catch it",
    **{
        ("certfsm", name): "the box tree of a refined table (docs/design.md, 'Box trees'), for fsm to build and the "
        "runtime and the export to read"
        for name in (
            "BoxTreeError",
            "Evidence",
            "decode_tree",
        )
    },
    ("certfsm.fsm", "EXACT"): "a value of Table.status in what the public distill returns",
    ("certfsm.fsm", "CONSERVATIVE"): "a value of Table.status in what the public distill returns",
    ("certfsm.fsm", "UNDECIDED"): "a value of Table.status in what the public distill returns",
    ("certfsm.hdl_export", "print_verilog"): "prints the module of the public hardware_of, as print_c does",
    ("certfsm.runtime", "Controller"): "what runtime.load returns; the README documents Controller.step",
    ("certfsm.runtime", "RuntimeCounters"): "what an embedder attaches with Controller.attach_counters",
    ("certfsm.runtime", "serve_metrics"): "serves those counters to Prometheus; certfsm run does it in run_artifact",
}
"""Public names meant for users that nothing outside their package uses yet, each with the reason it stays."""


def exported_names(package: str) -> list[str]:
    """The literal `__all__` of a package's `__init__.py`, read without importing it."""
    tree = ast.parse((ROOT / package.rpartition(".")[2] / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return [ast.literal_eval(item) for item in node.value.elts]
    return []


def names_used(source: str, module_name: str, *, is_package: bool = False) -> dict[str, set[str]]:
    """Package -> the names `source` takes from it: `from certfsm.fsm import x` (relative ones too),
    `certfsm.fsm.x`, and `f.x` after `import certfsm.fsm as f` or `from certfsm import fsm`, in functions too;
    for the core (`certfsm`), `from certfsm import x` and `certfsm.x`."""
    tree = ast.parse(source)
    used: dict[str, set[str]] = {}
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module if not node.level else _resolve(module_name, is_package, node.level, node.module)
            if module in SUB_PACKAGE_NAMES:
                used.setdefault(module, set()).update(alias.name for alias in node.names)
            elif module == "certfsm":
                aliases |= {a.asname or a.name: f"certfsm.{a.name}" for a in node.names if a.name in SUB_PACKAGES}
                used.setdefault("certfsm", set()).update(a.name for a in node.names if a.name not in SUB_PACKAGES)
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in SUB_PACKAGE_NAMES}
    for node in ast.walk(tree):
        parts = (_dotted(node) or "").split(".") if isinstance(node, ast.Attribute) else []
        if len(parts) >= 3 and ".".join(parts[:2]) in SUB_PACKAGE_NAMES:
            used.setdefault(".".join(parts[:2]), set()).add(parts[2])
        elif len(parts) >= 2 and parts[0] in aliases:
            used.setdefault(aliases[parts[0]], set()).add(parts[1])
        elif len(parts) >= 2 and parts[0] == "certfsm" and parts[1] not in SUB_PACKAGES:
            used.setdefault("certfsm", set()).add(parts[1])
    return used


def names_documented(text: str) -> dict[str, set[str]]:
    """Package -> the names a document writes out: `certfsm.fsm.x`, `fsm.x`, `from certfsm.fsm import x, y`; for
    the core, `certfsm.x` and `from certfsm import x, y` (a bare name is no use: a document may name the core's
    insides, as docs/ does)."""
    used: dict[str, set[str]] = {}
    for name in SUB_PACKAGES:
        found = set(re.findall(rf"\b(?:certfsm\.)?{name}\.([A-Za-z_]\w*)", text))
        for grouped, line in re.findall(rf"from certfsm\.{name} import (?:\(([^)]*)\)|([^\n]*))", text):
            found |= {part.split(" as ")[0].strip() for part in (grouped or line).split(",")} - {""}
        used[f"certfsm.{name}"] = found
    found = set(re.findall(r"\bcertfsm\.([A-Za-z_]\w*)", text)) - SUB_PACKAGES
    for grouped, line in re.findall(r"from certfsm import (?:\(([^)]*)\)|([^\n]*))", text):
        found |= {part.split(" as ")[0].strip() for part in (grouped or line).split(",")} - {""} - SUB_PACKAGES
    used["certfsm"] = found
    return used


def uses_outside_home() -> dict[str, set[str]]:
    """Sub-package -> the names of it used outside its own folder (and its tests): by the other packages, the CLI,
    the bench scripts, the packaging and the documents users read."""
    used: dict[str, set[str]] = {}
    for path, module_name, is_package in production_files():
        home = owner(module_name)[0]
        for package, names in names_used(path.read_text(), module_name, is_package=is_package).items():
            if package != home:
                used.setdefault(package, set()).update(names)
    for path in sorted((ROOT / "packaging").rglob("*.py")):
        for package, names in names_used(path.read_text(), "packaging._").items():
            used.setdefault(package, set()).update(names)
    for place in USER_DOCUMENTS:
        for path in [ROOT / place] if place.endswith(".md") else sorted((ROOT / place).rglob("*.md")):
            for package, names in names_documented(path.read_text()).items():
                used.setdefault(package, set()).update(names)
    return used


@pytest.mark.slow
def test_every_public_name_of_a_package_is_used_outside_it():
    """A package exports what other packages, the CLI, the bench scripts, the packaging and the README use, so
    that its surface stays what a reader must learn; its own tests import the rest from its underscore modules."""
    used = uses_outside_home()
    unused = [
        f"{package}.{name}"
        for package in SURFACES
        for name in exported_names(package)
        if name not in used.get(package, set()) and (package, name) not in FOR_USERS
    ]
    assert len(used.get("certfsm.fsm", ())) > 3, "no use of certfsm.fsm was found: the scan is broken"
    assert not unused, (
        "exported but used by no other package, no bench script and no document; drop them from __all__ (tests "
        "import them from the private module) or give FOR_USERS a reason:\n" + "\n".join(unused)
    )
    stale = [
        f"{package}.{name}"
        for package, name in FOR_USERS
        if name not in exported_names(package) or name in used.get(package, set())
    ]
    assert not stale, "FOR_USERS entries no longer needed (not exported, or used now): " + ", ".join(stale)


USES = [
    ("from certfsm.fsm import distill, Grid as G\n", "bench.x", "certfsm.fsm", {"distill", "Grid"}),
    ("def f():\n    from ..fsm import StepEncoding\n", "certfsm.hdl_export._claims", "certfsm.fsm", {"StepEncoding"}),
    ("import certfsm.verify as v\nv.check(1)\n", "certfsm.cli", "certfsm.verify", {"check"}),
    ("from certfsm import runtime\nruntime.load('x').step()\n", "bench.x", "certfsm.runtime", {"load"}),
    ("import certfsm.hdl_export\ncertfsm.hdl_export.export_c(1)\n", "bench.x", "certfsm.hdl_export", {"export_c"}),
    ("from certfsm import SpecError, fsm\nfsm.distill(1)\n", "bench.x", "certfsm", {"SpecError"}),
    ("def f():\n    from .. import Network\n", "certfsm.verify._bounds", "certfsm", {"Network"}),
    ("import certfsm\ncertfsm.load_spec('x')\ncertfsm.fsm.Grid\n", "bench.x", "certfsm", {"load_spec"}),
]


@pytest.mark.parametrize("source, module_name, package, expected", USES, ids=[row[0] for row in USES])
def test_each_way_of_using_a_public_name_is_seen(source, module_name, package, expected):
    assert names_used(source, module_name)[package] == expected


def test_a_document_uses_the_names_it_writes_out():
    text = "see `certfsm.fsm.StepEncoding` and `runtime.load(path)`; certfsm.machine is not\n"
    text += "from certfsm.verify import (\n    check,\n    falsify as f,\n)\n"
    found = names_documented(text)
    assert found["certfsm.fsm"] == {"StepEncoding"} and found["certfsm.runtime"] == {"load"}
    assert found["certfsm.verify"] == {"check", "falsify"} and found["certfsm.hdl_export"] == set()
    assert found["certfsm"] == {"machine"}
    found = names_documented("`certfsm.load_spec(path)`; from certfsm import Artifact, fsm\n`decide` alone\n")
    assert found["certfsm"] == {"load_spec", "Artifact"}
