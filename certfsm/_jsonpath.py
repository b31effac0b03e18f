"""JSON paths for error messages: ``("inputs", 2, "bins")`` -> ``inputs[2].bins``.

Specs and artifacts both point at the offending field this way, so a
user reads the same notation in every message. Standard library only:
the artifact loader runs on targets without jsonschema.
"""

from __future__ import annotations

import json
from typing import Iterable


def json_path(parts: Iterable[str | int], whole: str) -> str:
    """The dotted/bracketed path of `parts`; `whole` names the document itself (an empty path)."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier():
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    if not text:
        return whole
    return text if not text.startswith("[") else whole + text
