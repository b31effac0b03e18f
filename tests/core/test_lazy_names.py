"""The core's lazy names: `_LAZY` loads them on first use, and an `if TYPE_CHECKING:` block names the same
names from the same modules for the type checker (certfsm/__init__.py).

Why both: PEP 562's `__getattr__` keeps `import certfsm.runtime` to the standard library, but a type checker
sees its `-> Any` and stops checking every annotation that uses a lazy name. The block gives each name its real
type; the test keeps the two lists one, so a name added to one and not the other fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import certfsm

INIT = Path(certfsm.__file__).read_text()


def lazy_table(source: str) -> dict[str, str]:
    """The literal `_LAZY` of the core's __init__: public name -> module."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            return dict(ast.literal_eval(node.value))
    raise AssertionError("certfsm/__init__.py has no literal _LAZY")


def typed_names(source: str) -> dict[str, str]:
    """Public name -> module of every `from .<module> import name` under a module-level `if TYPE_CHECKING:`.

    Only names in `__all__` count: the block may also import helper types for the loader functions'
    annotations (`ControllerSpec`, `KeySource`), which the core does not export.
    """
    tree = ast.parse(source)
    exported = set(certfsm.__all__)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module:
                    for alias in statement.names:
                        if (alias.asname or alias.name) in exported:
                            assert alias.asname is None, f"{alias.name} is imported as {alias.asname}"
                            assert alias.name not in found, f"{alias.name} is imported twice"
                            found[alias.name] = statement.module
    return found


def test_the_type_checking_block_names_the_lazy_names_from_their_modules():
    lazy = lazy_table(INIT)
    typed = typed_names(INIT)
    assert len(lazy) > 20, "the _LAZY table was not read"
    assert typed == lazy, {
        "lazy, not typed": sorted(set(lazy) - set(typed)),
        "typed, not lazy": sorted(set(typed) - set(lazy)),
        "other module": sorted(name for name in set(lazy) & set(typed) if lazy[name] != typed[name]),
    }


def test_the_lazy_names_are_the_modules_values():
    for name, module in lazy_table(INIT).items():
        assert getattr(certfsm, name) is getattr(sys.modules[f"certfsm.{module}"], name), name


def test_a_drift_between_the_block_and_the_table_is_seen():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ._network import Network\n    from ._decision import decide\n"
        "_LAZY = {'Network': '_network', 'decide': '_decision'}\n"
    )
    assert typed_names(source) == lazy_table(source)
    assert typed_names(source.replace("._decision import", "._network import")) != lazy_table(source)
    assert typed_names(source.replace("    from ._decision import decide\n", "")) != lazy_table(source)


def test_importing_the_core_loads_no_lazy_module():
    code = (
        "import sys, certfsm\n"
        "print(sorted(m for m in (f'certfsm.{v}' for v in certfsm._LAZY.values()) if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
