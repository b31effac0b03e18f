"""The auditor's re-check: re-run every .smt2 file of a report folder in a stock solver.

For each file (sorted by name) the recorded ``(set-info :status ...)`` is
compared with the answer of an independent solver process, and the file's
SHA-256 with the one `summary.json` recorded when the report was written.
Each row ends in one of four outcomes (`RecheckRow`), so that a solver
that gave up is never confused with a proof that is wrong:

- ``confirmed``: the solver gave the recorded status, and the file is the
  one the report wrote;
- ``unconfirmed``: the solver gave no definite answer (it timed out,
  answered unknown, or failed or crashed; `RecheckRow.reason` says which):
  nothing contradicts the file, but nothing confirms it either;
- ``mismatch``: the solver answered sat where the file records unsat, or
  the reverse: the proof, or the file, is wrong;
- ``invalid``: the file is not what the report wrote or says two things
  (its hash differs from summary.json, summary.json lists it but it is
  missing or the reverse, its header and script disagree, it records no
  status).

A mismatch outranks invalid, which outranks unconfirmed: a row is never
``confirmed`` unless the check positively confirms the file. A file whose
recorded status is ``unknown`` claims nothing, so the solver is not run
("skipped") and the row is confirmed when its hash checks out.

Solvers run as child processes (a crash or hang cannot take the caller
down, and the child is killed a little after the timeout):

- z3: the ``z3`` command that the z3-solver package installs, ``z3 -T:<s> FILE``;
- cvc5: a ``cvc5`` command on PATH (``cvc5 --tlimit=<ms> FILE``), else the
  cvc5 PyPI package, which ships no command but Python bindings with an
  SMT-LIB parser; they run in a child Python (`_cvc5_main`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from certfsm import EngineError, ReportError

from ._smtlib import read_header, read_status

SOLVERS = ("z3", "cvc5")
_GRACE_SECONDS = 5.0
_ANSWERS = ("sat", "unsat", "unknown", "timeout")
CONFIRMED, UNCONFIRMED, MISMATCH, INVALID = "confirmed", "unconfirmed", "mismatch", "invalid"
RECHECK_OUTCOMES = (CONFIRMED, UNCONFIRMED, MISMATCH, INVALID)
_STATUS_DISAGREEMENT = re.compile(r'^\(error "line \d+ column \d+: check annotation that says \w+"\)$')


@dataclass(frozen=True)
class RecheckRow:
    """One file's re-check.

    `answer` is what the solver said (sat, unsat, unknown, timeout, error),
    or skipped (not run) or missing; `outcome` is one of `RECHECK_OUTCOMES` (the
    module docstring says what each means); `reason` says why an
    unconfirmed row is unconfirmed ("timeout after 60 s", "solver answered
    unknown", "solver failed, exit status 1", "solver crashed, signal 11")
    and is empty otherwise; `note` lists every finding.
    """

    file: str
    recorded_status: str
    answer: str
    seconds: float
    outcome: str
    note: str
    sha256: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        """True only when the row is confirmed."""
        return self.outcome == CONFIRMED

    @property
    def label(self) -> str:
        """The outcome as a re-check listing shows it: a failing one in capitals, an unconfirmed one with its reason."""
        if self.outcome == UNCONFIRMED:
            return f"{UNCONFIRMED} ({self.reason})"
        return self.outcome if self.outcome == CONFIRMED else self.outcome.upper()


def recheck_folder(folder, solver: str = "z3", timeout: float = 60.0) -> list[RecheckRow]:
    """Re-run each ``*.smt2`` in `folder` with `solver` and compare; one row per file.

    Also one failing row per file that summary.json lists but the folder
    lacks. Raises ReportError for a missing folder, a folder without
    .smt2 files or an unreadable summary.json; EngineError when the solver
    cannot be run.
    """
    if solver not in SOLVERS:
        raise EngineError(f"recheck: solver={solver!r} is not one of {SOLVERS}; choose z3 or cvc5")
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"recheck: timeout={timeout!r} is not a positive number of seconds; give e.g. 60")
    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such report folder; give the folder that certfsm verify wrote")
    files = sorted(folder.glob("*.smt2"))
    if not files:
        raise ReportError(
            f"{folder}: holds no .smt2 files, so there is nothing to re-check; "
            "give the folder that certfsm verify wrote"
        )
    command = _solver_command(solver)
    limit = _solver_limit(solver, timeout)
    recorded_hashes = _summary_hashes(folder)
    rows = [_recheck_file(path, command, limit, recorded_hashes) for path in files]
    present = {path.name for path in files}
    for name in sorted(set(recorded_hashes or ()) - present):
        rows.append(RecheckRow(name, "", "missing", 0.0, INVALID, "listed in summary.json but not in the folder"))
    return rows


def _solver_limit(solver: str, timeout: float) -> float:
    """The time limit the solver is actually given: z3's -T takes whole seconds, cvc5's --tlimit milliseconds."""
    if solver == "z3":
        return float(max(1, math.ceil(timeout)))
    return max(1, math.ceil(timeout * 1000)) / 1000


def _summary_hashes(folder: Path) -> dict[str, str] | None:
    """File name -> SHA-256 from every object in summary.json with "smt2" and "smt2_sha256"; None without summary."""
    path = folder / "summary.json"
    if not path.exists():
        return None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportError(
            f"{path}: cannot be read as JSON ({error}); restore it or remove it to re-check without hashes"
        ) from None
    hashes: dict[str, str] = {}
    pending = [summary]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if isinstance(item.get("smt2"), str) and isinstance(item.get("smt2_sha256"), str):
                hashes[Path(item["smt2"]).name] = item["smt2_sha256"]
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return hashes


def _recheck_file(path: Path, command, limit: float, recorded_hashes: dict[str, str] | None) -> RecheckRow:
    try:
        data = path.read_bytes()
    except OSError as error:
        reason = f"cannot read the file ({error.strerror or error})"
        return RecheckRow(path.name, "", "skipped", 0.0, UNCONFIRMED, reason, reason=reason)
    sha256 = hashlib.sha256(data).hexdigest()
    text = data.decode("utf-8", errors="replace")
    status = read_status(text) or ""
    problems = _file_problems(path.name, text, status, sha256, recorded_hashes)
    if status == "unknown":
        note = "; ".join(problems) or "recorded status unknown: nothing to confirm"
        return RecheckRow(path.name, status, "skipped", 0.0, INVALID if problems else CONFIRMED, note, sha256)
    if status not in ("sat", "unsat"):
        problems.append("no (set-info :status sat|unsat|unknown) in the file")
        return RecheckRow(path.name, status, "skipped", 0.0, INVALID, "; ".join(problems), sha256)
    answer, seconds, detail = _run_solver(command, path, limit)
    if answer in ("sat", "unsat") and answer != status:
        problems.insert(0, f"solver answered {answer} but the file records {status}")
        return RecheckRow(path.name, status, answer, seconds, MISMATCH, "; ".join(problems), sha256)
    if answer == status:
        outcome = INVALID if problems else CONFIRMED
        return RecheckRow(
            path.name, status, answer, seconds, outcome, "; ".join(problems) or f"solver confirms {status}", sha256
        )
    reason = (
        f"timeout after {limit:g} s"
        if answer == "timeout"
        else "solver answered unknown"
        if answer == "unknown"
        else detail
    )
    if problems:
        return RecheckRow(path.name, status, answer, seconds, INVALID, "; ".join([*problems, reason]), sha256)
    if answer == "timeout":
        note = f"nothing contradicts the recorded {status}, but the solver did not finish; give it more time"
    elif answer == "unknown":
        note = f"nothing contradicts the recorded {status}, but the solver could not decide; try the other solver"
    else:
        reason, _, message = reason.partition(": ")
        note = f"nothing contradicts the recorded {status}, but the solver stopped without an answer: {message}"
    return RecheckRow(path.name, status, answer, seconds, UNCONFIRMED, note, sha256, reason)


def _file_problems(name: str, text: str, status: str, sha256: str, recorded_hashes) -> list[str]:
    problems = []
    if recorded_hashes is not None:
        if name not in recorded_hashes:
            problems.append("not listed in summary.json")
        elif recorded_hashes[name] != sha256:
            problems.append("sha256 differs from summary.json: the file changed after the report was written")
    header = read_header(text)
    if "status" in header and header["status"] != status:
        problems.append(f"header says status {header['status']} but the script says {status or 'nothing'}")
    if header.get("verdict") == "proved" and status != "unsat":
        problems.append(f"header says verdict proved but the script's status is {status or 'missing'}")
    return problems


def _solver_command(solver: str):
    """A function (path, timeout) -> argv that runs `solver` on one file."""
    if solver == "z3":
        binary = shutil.which("z3")
        if binary is None:
            raise EngineError("recheck: no z3 command on PATH; pip install z3-solver (it installs the z3 command)")
        return lambda path, timeout: [binary, f"-T:{max(1, math.ceil(timeout))}", str(path)]
    binary = shutil.which("cvc5")
    if binary is not None:
        return lambda path, timeout: [binary, f"--tlimit={max(1, math.ceil(timeout * 1000))}", str(path)]
    if importlib.util.find_spec("cvc5") is not None:
        runner = "from certfsm.verify._recheck import _cvc5_main; _cvc5_main()"
        return lambda path, timeout: [sys.executable, "-c", runner, str(path), str(max(1, math.ceil(timeout * 1000)))]
    raise EngineError(
        "recheck: cvc5 is not installed (no cvc5 command on PATH, no cvc5 Python package); "
        "pip install cvc5, or use solver='z3'"
    )


def _run_solver(command, path: Path, limit: float) -> tuple[str, float, str]:
    """(answer, seconds, detail): answer is sat/unsat/unknown/timeout/error; for an error, detail says whether the
    solver could not start, failed (with its exit status and first message) or crashed (with its signal)."""
    started = time.monotonic()
    try:
        completed = subprocess.run(
            command(path, limit),
            capture_output=True,
            text=True,
            timeout=limit + _GRACE_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started, ""
    except OSError as error:
        return "error", time.monotonic() - started, f"solver could not start: {error.strerror or error}"
    seconds = time.monotonic() - started
    lines = [line.strip() for line in completed.stdout.splitlines() if line.strip()]
    # z3 checks the answer against :status itself and then fails with
    # "check annotation that says unsat"; the answer line still tells what it found.
    disagreements = [line for line in lines if _STATUS_DISAGREEMENT.match(line)]
    errors = [line for line in lines if line.startswith("(error") and line not in disagreements]
    answers = [line for line in lines if line in _ANSWERS]
    is_clean_exit = completed.returncode == 0 or (disagreements and not errors)
    if errors or not is_clean_exit or len(answers) != 1:
        message = (errors or completed.stderr.strip().splitlines() or lines or ["no output"])[0]
        if "timeout" in message.lower() or "interrupted" in message.lower():
            return "timeout", seconds, ""
        if completed.returncode < 0:
            return "error", seconds, f"solver crashed, signal {-completed.returncode}: {message[:200]}"
        return "error", seconds, f"solver failed, exit status {completed.returncode}: {message[:200]}"
    return answers[0], seconds, ""


def _cvc5_main() -> None:
    """Child process: run the SMT-LIB file argv[1] with the cvc5 bindings, time limit argv[2] ms.

    Prints what the cvc5 command would: one line per check-sat (sat,
    unsat, unknown), or "timeout" when the limit cut a check-sat short;
    a parse or solver error goes to stderr with exit status 1.
    """
    import cvc5

    path, milliseconds = sys.argv[1], sys.argv[2]
    solver = cvc5.Solver()
    solver.setOption("tlimit-per", milliseconds)
    symbols = cvc5.SymbolManager(solver)
    parser = cvc5.InputParser(solver, symbols)
    try:
        parser.setFileInput(cvc5.InputLanguage.SMT_LIB_2_6, path)
        while not (command := parser.nextCommand()).isNull():
            if command.getCommandName() == "check-sat":
                answer = solver.checkSat()
                is_timeout = answer.isUnknown() and answer.getUnknownExplanation() == cvc5.UnknownExplanation.TIMEOUT
                print("timeout" if is_timeout else str(answer), flush=True)
            elif command.getCommandName() == "exit":
                break
            elif command.getCommandName() == "set-info" and ":status" in command.toString():
                continue  # cvc5 would fail on a contradicting :status; the caller compares instead
            else:
                command.invoke(solver, symbols)
    except RuntimeError as error:
        print(f'(error "{" ".join(str(error).split())}")', flush=True)
        sys.exit(1)
