"""Seeded random ReLU controllers of the size a user brings, for distillation benchmarks.

Each case is a fully connected 2 x 32 ReLU network with random weights
(He initialisation, rounded to float32 so that the ONNX file holds the
network exactly) and a spec over equal-width bins of [0, 1] per input,
argmax over four tokens, conservative token HOLD, every token legal:

- random5: 5 inputs x 10 bins = 100 000 cells;
- random7: 7 inputs x 6 bins = 279 936 cells.

The same seed gives the same bytes (weights, ONNX file, spec), so a
benchmark run can be repeated and compared.

    python bench/controllers.py OUT_DIR [--seed 0] [--only random5]

writes OUT_DIR/<case>.onnx and OUT_DIR/<case>.spec.json and prints the
spec paths.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

CASES = {"random5": (5, 10), "random7": (7, 6)}
"""Per case: inputs and equal-width bins per input."""
HIDDEN = (32, 32)
BIAS_STD = (1.0, 0.5, 0.1)
"""Per layer. Wide first-layer biases leave a part of the ReLUs stable over the whole envelope, as training
does for a controller with a few thresholds; with the biases of He initialisation (all near 0) every
ReLU switches inside the envelope, and the bounds leave twice the cells to the engines at three times the cost
per cell (measured on 1 500 cells of random5)."""
TOKENS = ("HOLD", "LOW", "MID", "HIGH")
CONSERVATIVE = "HOLD"


def random_layers(n_inputs: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight (out, in), bias (out,)) per layer, float32 values, from `seed` alone."""
    rng = np.random.default_rng(seed)
    sizes = (n_inputs, *HIDDEN, len(TOKENS))
    layers = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        weight = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_out, fan_in)).astype(np.float32)
        bias = rng.normal(0.0, BIAS_STD[len(layers)], size=fan_out).astype(np.float32)
        layers.append((weight, bias))
    return layers


def onnx_bytes(layers: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """A Gemm/Relu ONNX model of `layers` with a free batch dimension (input "x", output "scores")."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, current = [], [], "x"
    for index, (weight, bias) in enumerate(layers):
        initializers += [numpy_helper.from_array(weight, f"w{index}"), numpy_helper.from_array(bias, f"b{index}")]
        output = "scores" if index == len(layers) - 1 else f"gemm{index}"
        nodes.append(helper.make_node("Gemm", [current, f"w{index}", f"b{index}"], [output], transB=1))
        current = output
        if index < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [current], [f"relu{index}"]))
            current = f"relu{index}"
    graph = helper.make_graph(
        nodes,
        "random_controller",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", layers[0][0].shape[1]])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", len(TOKENS)])],
        initializers,
    )
    model = helper.make_model(graph, producer_name="certfsm-bench", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def spec_document(case: str, seed: int) -> dict:
    n_inputs, bins = CASES[case]
    return {
        "certfsm_spec": 1,
        "name": case,
        "description": f"A random 2x32 ReLU controller (seed {seed}) for benchmarks: {bins**n_inputs} cells.",
        "model": f"{case}.onnx",
        "inputs": [{"name": f"x{k}", "unit": "1", "min": 0, "max": 1, "bins": bins} for k in range(n_inputs)],
        "outputs": list(TOKENS),
        "tokens": {token: code for code, token in enumerate(TOKENS)},
        "legal_tokens": list(TOKENS),
        "decision": "argmax",
        "conservative_token": CONSERVATIVE,
    }


def write_case(case: str, folder: Path, seed: int = 0) -> Path:
    """Write `case`'s ONNX model and spec into `folder`; the spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    n_inputs, _ = CASES[case]
    (folder / f"{case}.onnx").write_bytes(onnx_bytes(random_layers(n_inputs, seed)))
    path = folder / f"{case}.spec.json"
    path.write_text(json.dumps(spec_document(case, seed), indent=2) + "\n", encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write <case>.onnx and <case>.spec.json into")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights (default 0)")
    parser.add_argument("--only", default="", help=f"comma-separated cases ({', '.join(CASES)}; default: all)")
    args = parser.parse_args()
    cases = [c for c in args.only.split(",") if c] or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"--only {unknown[0]!r} is not a case; give one of {', '.join(CASES)}", file=sys.stderr)
        return 2
    for case in cases:
        print(write_case(case, args.out_dir, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
