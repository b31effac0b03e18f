"""Reading a controller spec: `load_spec`, `spec_from_dict` and the summary `check_spec`.

The three steps of `certfsm._spec` in order: plain JSON and the schema
(`_spec_schema`), then the semantic rules that build the IR
(`_spec_rules`). Its own module so that the IR (`_spec`) imports neither.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._spec import ControllerSpec, describe_spec
from ._spec_rules import SpecBuilder
from ._spec_schema import check_plain_json, check_schema, read_json


def load_spec(path: str | os.PathLike[str]) -> ControllerSpec:
    """Read, validate and check the spec file at `path`; the ONNX model it names must exist."""
    return spec_from_dict(read_json(path), path)


def spec_from_dict(data: Any, path: str | os.PathLike[str], *, require_model: bool = True) -> ControllerSpec:
    """Validate and check an already parsed spec document, as if it were read from `path`.

    `path` names the spec in error messages and anchors a relative
    `model`. With ``require_model=False`` the ONNX file need not exist
    (for specs built in memory); every other check still runs.
    """
    label = os.fspath(path)
    check_plain_json(data, label)
    check_schema(data, label)
    return SpecBuilder(data, label, Path(os.path.abspath(label))).build(require_model)


def check_spec(path: str | os.PathLike[str]) -> list[str]:
    """Human-readable summary lines of a valid spec (for ``certfsm spec check``); raises SpecError on problems."""
    return describe_spec(load_spec(path))
