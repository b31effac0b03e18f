"""The baseline: one VNN-LIB instance solved by plain maraboupy, as a user would without certfsm.

maraboupy's own ONNX reader, the VNN-LIB input box as variable bounds,
the unsafe set as output inequalities (a disjunction through
addDisjunctionConstraint), one worker, Marabou's default options with
quiet output. Only the VNN-LIB parsing is certfsm's (maraboupy has no
VNN-LIB reader). Prints one line: `<answer> <solve seconds>`.

    python bench/plain_marabou.py NET.onnx PROP.vnnlib TIMEOUT_SECONDS
"""

from __future__ import annotations

import argparse
import math
import os
import time


def solve(onnx_path: str, vnnlib_path: str, timeout: float) -> str:
    """Marabou's answer on the one property of `vnnlib_path`: sat, unsat, timeout or unknown."""
    from maraboupy import Marabou, MarabouCore, MarabouUtils

    from certfsm.verify import parse_vnnlib

    network = Marabou.read_onnx(onnx_path)
    inputs = network.inputVars[0].flatten()
    outputs = network.outputVars[0].flatten()
    properties = parse_vnnlib(vnnlib_path, n_inputs=len(inputs), n_outputs=len(outputs))
    if len(properties) != 1:
        return "unknown"
    prop = properties[0]
    for var, lo, hi in zip(inputs, prop.lower, prop.upper):
        network.setLowerBound(int(var), float(lo))
        network.setUpperBound(int(var), float(hi))

    def equations(conjunction):
        result = []
        for row, rhs in zip(conjunction.A, conjunction.b):
            equation = MarabouUtils.Equation(MarabouCore.Equation.LE)
            for var, coefficient in zip(outputs, row):
                if coefficient:
                    equation.addAddend(float(coefficient), int(var))
            equation.setScalar(float(rhs))
            result.append(equation)
        return result

    if len(prop.unsafe) == 1:
        for row, rhs in zip(prop.unsafe[0].A, prop.unsafe[0].b):
            nonzero = [(int(v), float(c)) for v, c in zip(outputs, row) if c]
            network.addInequality([v for v, _ in nonzero], [c for _, c in nonzero], float(rhs))
    else:
        network.addDisjunctionConstraint([equations(c) for c in prop.unsafe])
    options = Marabou.createOptions(timeoutInSeconds=int(math.ceil(timeout)), verbosity=0)
    exit_code, _values, _stats = network.solve(options=options, verbose=False)
    answer = exit_code.lower()
    return answer if answer in ("sat", "unsat") else ("timeout" if answer == "timeout" else "unknown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("onnx", help="the network (NET.onnx)")
    parser.add_argument("vnnlib", help="the property (PROP.vnnlib), one disjunction of unsafe sets")
    parser.add_argument("timeout", type=float, help="Marabou's timeout in seconds (rounded up to whole seconds)")
    args = parser.parse_args()
    started = time.perf_counter()
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1)
    os.dup2(devnull, 1)  # Marabou's C++ side prints to fd 1
    try:
        answer = solve(args.onnx, args.vnnlib, args.timeout)
    finally:
        os.dup2(saved, 1)
    print(answer, f"{time.perf_counter() - started:.3f}")


if __name__ == "__main__":
    main()
