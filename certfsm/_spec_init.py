"""A starting spec from an ONNX model: everything the model tells, and envelopes left for the user to fill in.

`starting_spec` reads the model with the core's ONNX loader (so a model
certfsm cannot take is refused here, with the loader's one-line error)
and writes what the model fixes: one input per element of its input
tensor, one token per output. What no model can tell is left out or set
to the mildest choice:

- each input's envelope ``min`` and ``max`` is JSON null. A safety tool
  must not verify over a guessed range, so the spec is not valid until
  the user writes the physical range of every input: reading it stops at
  the first null with one line naming its JSON path and what to write
  (`certfsm._spec_schema`);
- inputs are named x0..x{n-1} and tokens t0..t{k-1} with codes 0..k-1
  (an ONNX input tensor names no elements, and certfsm takes models with
  one input tensor); units are empty and each input gets `DEFAULT_BINS`
  equal-width bins, no frac_bits (``spec check`` names the inputs that
  the hardware exports still need them for);
- decision argmax, every token legal, the first one conservative, no
  legality rules, no confidence gate, the default hysteresis.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath
from typing import Any

from ._errors import ModelError
from ._onnx import load_onnx
from ._spec import SPEC_FORMAT_VERSION

DEFAULT_BINS = 4
"""Equal-width bins per input in a starting spec: a coarse first grid (4^n cells) that distils quickly."""
MAX_TOKENS = 16
"""A token's code is 4 bits, so a spec has at most 16 outputs."""
_NOT_IN_LABEL = re.compile(r"[^A-Za-z0-9_.\-]")


def starting_spec(
    model_path: str | os.PathLike[str], *, spec_path: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The spec document to start from for the model at `model_path`, with every input's min and max null.

    `spec_path` is where the document will be written: its ``model`` is
    then relative to that file's folder, as a spec's ``model`` is read;
    without it, ``model`` is `model_path` as given. Raises ModelError (one
    line naming the file) for a model the ONNX loader refuses or one with
    fewer than 2 or more than `MAX_TOKENS` outputs.
    """
    network = load_onnx(model_path)
    where = os.fspath(model_path)
    if not 2 <= network.n_outputs <= MAX_TOKENS:
        raise ModelError(
            f"{where}: has {network.n_outputs} outputs; a controller spec needs one output per token, from 2 to "
            f"{MAX_TOKENS} (each token has a 4-bit code), so re-export the model with one score per token"
        )
    tokens = [f"t{k}" for k in range(network.n_outputs)]
    return {
        "certfsm_spec": SPEC_FORMAT_VERSION,
        "name": _label(Path(where).stem),
        "description": f"Started by certfsm spec init from {Path(where).name}: fill in every input's min and max.",
        "model": _model_field(where, spec_path),
        "inputs": [
            {"name": f"x{i}", "unit": "", "min": None, "max": None, "bins": DEFAULT_BINS}
            for i in range(network.n_inputs)
        ],
        "outputs": tokens,
        "tokens": {token: code for code, token in enumerate(tokens)},
        "legal_tokens": list(tokens),
        "decision": "argmax",
        "conservative_token": tokens[0],
        "legality_rules": [],
        "hysteresis": {"confirm_cycles": 1, "cooldown_cycles": 0},
    }


def _model_field(model_path: str, spec_path: str | os.PathLike[str] | None) -> str:
    """The spec's ``model``: relative to the spec file's folder (POSIX separators), or as given."""
    if spec_path is None:
        return model_path
    folder = Path(os.path.abspath(spec_path)).parent
    return PurePath(os.path.relpath(os.path.abspath(model_path), folder)).as_posix()


def _label(stem: str) -> str:
    """The model's file name as a spec name (letters, digits, '_', '-', '.'; not starting with '-' or '.')."""
    label = _NOT_IN_LABEL.sub("_", stem)
    return label if label and label[0] not in "-." else f"controller{label}"
