"""``python -m teparity repro --all`` (every reproduction run here into a JSON of verdicts) and ``repro-table`` (those
verdicts beside the gate's word for each entry on the same stack: agreement, or a disagreement that exits 1)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teparity.report.parity import ParityReport, TestOutcome
from teparity.known import registry, repro
from teparity.known.registry import BY_ID
from teparity.stack.versions import Versions
from teparity.tools import repro_table
from harness import REPO

SRC = REPO / "src"
STACK = {"torch": "2.11.0", "thunder": "0.2.6", "transformer_engine": "2.12.0"}
OTHER = {"torch": "2.11.0", "thunder": "0.2.6", "transformer_engine": "2.9.0"}
LAST = {"REPRODUCED": "REPRODUCED: 3 linears fell back to torch", "NOT REPRODUCED": "NOT REPRODUCED: TE holds them",
        "CANNOT RUN HERE": "CANNOT RUN HERE: no FP8 GPU (compute capability 8.9 or newer)",
        "TIMED OUT": "no verdict within 5 s", "CRASHED": "RuntimeError: CUDA error: out of memory"}
STATUS = {"REPRODUCED": 0, "NOT REPRODUCED": 1, "CANNOT RUN HERE": 2, "TIMED OUT": None, "CRASHED": 1}


def _entry(entry_id: str, check: str, te: str = ">=2.10"):
    return dataclasses.replace(next(iter(BY_ID.values())), id=entry_id, checks=(check,), executors=("legacy",),
                               thunder=">=0.2.6,<0.2.7", te=te, without_te=False, torch=None, bounds=())


#: Synthetic entries, each with a check of its own; "out" ranges exclude TE 2.12.0 (and include 2.9.0).
REGISTRY = {
    "e-known": _entry("e-known", "ck"),
    "e-out": _entry("e-out", "co", te="<2.10"),
    "e-skip": _entry("e-skip", "cs"),
    "e-pass": _entry("e-pass", "cp"),
    "e-none": _entry("e-none", "cn"),
    "e-out-skip": _entry("e-out-skip", "cos", te="<2.10"),
}


def _gate(versions: dict) -> ParityReport:
    """On TE 2.12.0: e-known shows, e-out's tests pass, e-skip's and e-out-skip's skip, e-pass's pass (one is known as
    another entry), e-none has no test."""
    report = ParityReport(environment={"versions": versions}, exitstatus=0)
    te_212 = versions["transformer_engine"] == "2.12.0"
    report.record("ck[a]", "legacy", TestOutcome("t/ck-a", "known" if te_212 else "pass", "m", known_defect="e-known" if te_212 else None))
    report.record("ck[b]", "legacy", TestOutcome("t/ck-b", "pass", ""))
    report.record("ck[a]", "functional", TestOutcome("t/ck-f", "skip", "not this entry's executor"))
    report.record("co", "legacy", TestOutcome("t/co", "pass", ""))
    for check in ("cs", "cos"):
        report.record(check, "legacy", TestOutcome(f"t/{check}-1", "skip", "needs an FP8 GPU (sm_89+)"))
        report.record(check, "legacy", TestOutcome(f"t/{check}-2", "skip", "needs an FP8 GPU (sm_89+)"))
    report.record("cp", "legacy", TestOutcome("t/cp-1", "pass", ""))
    report.record("cp", "legacy", TestOutcome("t/cp-2", "known", "m", known_defect="e-known"))
    return report


def _run(versions: dict, verdicts: dict[str, str]) -> dict:
    return {"schema": repro_table.SCHEMA, "versions": versions, "entries": [
        {"entry": entry, "status": STATUS[verdict], "verdict": verdict, "last_line": LAST[verdict], "seconds": 2.5,
         "output_tail": "..."} for entry, verdict in verdicts.items()]}


def _table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: list[dict], gates: list[ParityReport]) -> tuple[int, str]:
    """``repro-table`` over these runs and reports (in-process, on the synthetic registry): exit status and markdown."""
    from teparity.__main__ import main

    monkeypatch.setattr(registry, "BY_ID", REGISTRY)
    words = ["repro-table", "--repros"]
    for i, run in enumerate(runs):
        (tmp_path / f"r{i}.json").write_text(json.dumps(run))
        words.append(str(tmp_path / f"r{i}.json"))
    words.append("--gate")
    for i, gate in enumerate(gates):
        gate.write(tmp_path / f"g{i}.json")
        words.append(str(tmp_path / f"g{i}.json"))
    status = main([*words, "--out", str(tmp_path / "table.md")])
    return status, (tmp_path / "table.md").read_text()


def _row(table: str, entry: str) -> list[str]:
    row = next(line for line in table.splitlines() if line.startswith(f"| `{entry}` |"))
    return [cell.strip() for cell in row.strip("|").split("|")[1:]]


@pytest.mark.parametrize(("entry", "verdict", "gate", "agrees"), [
    ("e-known", "REPRODUCED", "known", True),
    ("e-out", "NOT REPRODUCED", "out of range", True),
    ("e-skip", "CANNOT RUN HERE", "in range, not seen", True),
    ("e-out-skip", "CANNOT RUN HERE", "out of range", True),
    ("e-out", "REPRODUCED", "out of range", False),
    ("e-pass", "NOT REPRODUCED", "in range, masked by another entry", True),  # its known test is another entry's
    ("e-pass", "REPRODUCED", "in range, masked by another entry", True),  # in range, and there: the gate cannot see it
    ("e-known", "NOT REPRODUCED", "known", False),
    ("e-skip", "NOT REPRODUCED", "in range, not seen", False),
    ("e-known", "CANNOT RUN HERE", "known", False),
    ("e-pass", "CANNOT RUN HERE", "in range, masked by another entry", False),
    ("e-none", "CANNOT RUN HERE", "in range, not seen", False),  # no test of it: no skip to agree with
    ("e-known", "TIMED OUT", "known", False),
    ("e-out", "CRASHED", "out of range", False),
])
def test_each_verdict_agrees_with_one_word_of_the_gate_and_any_other_pair_is_a_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, verdict: str, gate: str, agrees: bool
) -> None:
    status, table = _table(tmp_path, monkeypatch, [_run(STACK, {entry: verdict})], [_gate(STACK)])
    cell = _row(table, entry)[0]
    assert status == (0 if agrees else 1), table
    if agrees:
        assert cell.split(" [")[0] == f"{verdict} / {gate}" and "1 of 1 agree; 0 disagree." in table, table
    else:
        assert cell == f"**{verdict} / {gate}** (disagreement 1)", table
        listed = next(line for line in table.splitlines() if line.startswith("1. "))
        exited = "-" if STATUS[verdict] is None else STATUS[verdict]
        assert listed.startswith(f"1. `{entry}` on thunder 0.2.6, TE 2.12.0: repro {verdict} (exit {exited}, 2.5 s): "
                                 f"{LAST[verdict]}; gate: {gate} ("), listed


def test_cannot_run_here_shows_the_gates_skip_reasons_beside_the_reproductions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status, table = _table(tmp_path, monkeypatch, [_run(STACK, {"e-skip": "CANNOT RUN HERE", "e-out": "NOT REPRODUCED"})], [_gate(STACK)])
    assert status == 0 and _row(table, "e-skip") == ["CANNOT RUN HERE / in range, not seen [1]"], table
    assert (f"[1] `e-skip` on thunder 0.2.6, TE 2.12.0: repro: {LAST['CANNOT RUN HERE']}; gate: 2 tests: 2 skip; "
            "skipped: needs an FP8 GPU (sm_89+) (2)") in table.splitlines(), table
    assert _row(table, "e-out") == ["NOT REPRODUCED / out of range"], table


def test_the_gate_word_counts_only_the_entrys_own_checks_executors_and_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status, table = _table(tmp_path, monkeypatch, [_run(STACK, {"e-pass": "TIMED OUT"})], [_gate(STACK)])
    assert status == 1 and "gate: in range, masked by another entry (2 tests: 1 known as e-known, 1 pass)" in table, table
    status, table = _table(tmp_path, monkeypatch, [_run(STACK, {"e-out": "REPRODUCED"})], [_gate(STACK)])
    assert status == 1 and "gate: out of range (TE 2.12.0 not in `<2.10`; 1 test: 1 pass)" in table, table
    status, table = _table(tmp_path, monkeypatch, [_run(STACK, {"e-known": "NOT REPRODUCED"})], [_gate(STACK)])
    assert status == 1 and "gate: known (2 tests: 1 known, 1 pass)" in table, table  # not the functional executor's skip


def test_each_run_is_joined_with_the_report_of_its_own_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On TE 2.12.0 e-known shows and e-out is out of range; on TE 2.9.0 the reverse (e-known out of range): the runs
    agree only against their own stack's report, whichever order the files come in (stacks ordered by TE)."""
    runs = [_run(STACK, {"e-known": "REPRODUCED", "e-out": "NOT REPRODUCED"}),
            _run(OTHER, {"e-known": "NOT REPRODUCED", "e-out": "NOT REPRODUCED"})]
    status, table = _table(tmp_path, monkeypatch, runs, [_gate(STACK), _gate(OTHER)])
    assert status == 1 and "3 of 4 agree; 1 disagree:" in table, table
    assert "| entry | thunder 0.2.6, TE 2.9.0 | thunder 0.2.6, TE 2.12.0 |" in table, table
    assert _row(table, "e-known") == ["NOT REPRODUCED / out of range", "REPRODUCED / known"], table
    # e-out on TE 2.9.0 is in range, its test passed: NOT REPRODUCED there is a disagreement.
    assert _row(table, "e-out") == ["**NOT REPRODUCED / in range, not seen** (disagreement 1)", "NOT REPRODUCED / out of range"]
    swapped = [_run(STACK, {"e-known": "NOT REPRODUCED"}), _run(OTHER, {"e-known": "REPRODUCED"})]
    status, table = _table(tmp_path, monkeypatch, swapped, [_gate(OTHER), _gate(STACK)])
    assert status == 1 and "2 disagree" in table, table


@pytest.mark.parametrize(("runs", "gates", "said"), [
    ([STACK], [OTHER], "no --gate report of thunder 0.2.6, TE 2.12.0, where a --repros run was made (the reports' stacks: "
                       "thunder 0.2.6, TE 2.9.0)"),
    ([STACK, STACK], [STACK], "two --repros runs of thunder 0.2.6, TE 2.12.0: give one per stack"),
    ([STACK], [STACK, STACK], "two --gate reports of thunder 0.2.6, TE 2.12.0: give one per stack"),
])
def test_a_run_without_its_stacks_report_or_two_of_one_stack_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], runs: list, gates: list, said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        _table(tmp_path, monkeypatch, [_run(v, {"e-known": "REPRODUCED"}) for v in runs], [_gate(v) for v in gates])
    assert stopped.value.code == 2 and f"python -m teparity repro-table: error: {said}" in capsys.readouterr().err


@pytest.mark.parametrize(("which", "content", "said"), [
    ("repros", "not json", "not a teparity repro run (not JSON: Expecting value: line 1)"),
    ("repros", '{"schema": "teparity.parity-report/1"}', "not a teparity repro run (schema 'teparity.parity-report/1', expected"),
    ("repros", '{"schema": "teparity.repro-run/1", "versions": {}, "entries": [{"entry": "x"}]}',
     "not a teparity repro run (an entry without entry, verdict and last_line"),
    ("gate", '{"schema": "other"}', "not a teparity parity report (schema 'other'"),
])
def test_a_file_that_is_not_a_repro_run_or_a_report_exits_2_naming_it(tmp_path: Path, which: str, content: str, said: str) -> None:
    good_run, good_gate, bad = tmp_path / "r.json", tmp_path / "g.json", tmp_path / "bad.json"
    good_run.write_text(json.dumps(_run(STACK, {"e-known": "REPRODUCED"})))
    _gate(STACK).write(good_gate)
    bad.write_text(content)
    runs, gates = (bad, good_gate) if which == "repros" else (good_run, bad)
    done = subprocess.run([sys.executable, "-m", "teparity", "repro-table", "--repros", str(runs), "--gate", str(gates)],
                          capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and done.stderr.startswith(f"python -m teparity repro-table: {bad}: {said}"), done.stderr
    assert "Traceback" not in done.stderr


def _teparity(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "teparity", *args], capture_output=True, text=True, timeout=timeout,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(("words", "said"), [
    ([], "name a registry entry's ID, or --all to run every reproduction here"),
    (["--all", "ddp-transform-rejects-input-grad"], "--all runs every reproduction: name no ID with it"),
    (["--all", "--issue"], "--out and --issue are for one entry's reproduction, not --all"),
    (["--all", "--out", "x.py"], "--out and --issue are for one entry's reproduction, not --all"),
    (["ddp-transform-rejects-input-grad", "--json", "x.json"], "--jobs, --json and --timeout-s go with --all"),
    (["--all", "--jobs", "0"], "argument --jobs: must be positive, got 0"),
    (["--all", "--timeout-s", "soon"], "argument --timeout-s: not a number: 'soon'"),
])
def test_repro_all_mixed_with_one_entrys_options_is_a_usage_error(words: list[str], said: str) -> None:
    done = _teparity("repro", *words)
    assert done.returncode == 2 and f"python -m teparity repro: error: {said}" in done.stderr, done.stderr
    assert "usage:" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""


def test_repro_all_here_says_what_each_entrys_range_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On this stack (CI: the default environment, no TE) a TE-free reproduction says REPRODUCED exactly where its
    entry's range holds, and one that needs an FP8 GPU cannot run: one of each kind, run as ``repro --all`` runs
    them (every one, through the command, is the timeout test's; test_repro.py runs each)."""
    pytest.importorskip("thunder")
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        pytest.skip("an FP8 GPU is here: its verdicts are the GPU runs'")
    installed = Versions.installed()
    kinds = [lambda e: e.without_te and e.holds_for_versions(installed),
             lambda e: e.without_te and not e.holds_for_versions(installed), lambda e: not e.without_te]
    available = repro.available()
    chosen = sorted({next(e for e in available if kind(BY_ID[e])) for kind in kinds if any(kind(BY_ID[e]) for e in available)})
    assert any(not BY_ID[e].without_te for e in chosen) and any(BY_ID[e].without_te for e in chosen), chosen
    data = repro_table.run_all_here(3, tmp_path / "runs" / "repros.json", 300, entries=chosen)
    said = capsys.readouterr().out.splitlines()
    assert json.loads((tmp_path / "runs" / "repros.json").read_text()) == data
    assert data["schema"] == repro_table.SCHEMA and data["versions"] == installed.to_json()
    assert [result["entry"] for result in data["entries"]] == chosen
    for result in data["entries"]:
        entry = BY_ID[result["entry"]]
        expected = ("REPRODUCED" if entry.holds_for_versions(installed) else "NOT REPRODUCED") if entry.without_te else "CANNOT RUN HERE"
        assert (result["verdict"], result["status"]) == (expected, STATUS[expected]), result
        assert result["last_line"].startswith(f"{expected}:") and result["output_tail"].rstrip().endswith(result["last_line"])
        assert f"{expected:<15} {result['seconds']:7.1f} s  {result['entry']}: {result['last_line']}" in said
    assert said[-1].startswith(f"{len(chosen)} reproductions on {installed.describe()} in ") and said[-1].endswith("repros.json")


def test_repro_all_records_a_timeout_as_its_own_verdict_and_exits_0(tmp_path: Path) -> None:
    done = _teparity("repro", "--all", "--jobs", "8", "--timeout-s", "0.01", "--json", str(tmp_path / "r.json"), timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert [(r["entry"], r["verdict"], r["status"]) for r in data["entries"]] == [(e, "TIMED OUT", None) for e in repro.available()]
    assert all(r["last_line"].startswith("no verdict within 0.01 s") for r in data["entries"])
    assert done.stdout.splitlines()[-1].endswith(f"{len(repro.available())} TIMED OUT; JSON: {tmp_path / 'r.json'}")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_a_timeout_kills_the_reproductions_own_processes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reproduction that starts ranks of its own (torchrun, spawn) leaves none behind when it is stopped."""
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print('started', child.pid, flush=True)\ntime.sleep(120)\n")
    monkeypatch.setattr(repro, "script", lambda entry_id: script)
    result = repro_table.run_one("any", timeout_s=3)
    assert result["verdict"] == "TIMED OUT" and result["status"] is None and result["seconds"] < 60, result
    pid = int(result["last_line"].split("started ")[1])
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid), f"the reproduction's child {pid} outlived its timeout"


@pytest.mark.parametrize(("script", "verdict", "last"), [
    ("print('REPRODUCED: it shows')\n", "REPRODUCED", "REPRODUCED: it shows"),
    ("print('NOT REPRODUCED: fine')\nraise SystemExit(1)\n", "NOT REPRODUCED", "NOT REPRODUCED: fine"),
    ("print('half way')\nraise RuntimeError('boom')\n", "CRASHED", "RuntimeError: boom"),  # exit 1, no verdict
    ("print('REPRODUCED: but')\nraise SystemExit(2)\n", "CRASHED", "REPRODUCED: but"),  # the status says another
    # A quoted error over several lines stays the verdict's (as thunder's InterpreterError printing a module does).
    ("print('NOT REPRODUCED: raised Error(\\n  (0): Linear\\n)')\nraise SystemExit(1)\n", "NOT REPRODUCED",
     "NOT REPRODUCED: raised Error( (0): Linear )"),
])
def test_a_verdict_needs_its_exit_status_and_last_line_to_agree_else_it_is_a_crash(
    monkeypatch: pytest.MonkeyPatch, script: str, verdict: str, last: str
) -> None:
    monkeypatch.setattr(repro, "script", lambda entry_id: script)
    result = repro_table.run_one("any", timeout_s=60)
    assert (result["verdict"], result["last_line"]) == (verdict, last), result


def test_a_test_held_against_a_combined_model_shows_each_entry_whose_change_the_model_holds() -> None:
    """The gate judges a test that several entries with models cover against their models together and names the entry
    whose signature matched first; the others' models were held too, unless a model running every linear in torch
    stood in for all of them (no FP8 state left for theirs to change)."""
    from teparity.known import models

    state, stash, torch_runs = models.STATE_PER_ENTRY, models.INPUT_GRAD_STASHED, models.TORCH_RUNS_EVERY_LINEAR
    first, second = (dataclasses.replace(_entry(name, "cc", te=">=2.0"), model=model) for name, model in
                     (("e-first", state), ("e-second", stash)))
    report = ParityReport(environment={"versions": STACK}, exitstatus=0)
    report.record("cc", "legacy", TestOutcome("t/cc", "known", "m", known_defect="e-first", modeled="pass"))
    said = repro_table.judge(second, "e-second", {"verdict": "REPRODUCED"}, report, {"e-first": first, "e-second": second})
    assert (said.gate, said.agrees) == ("known", True)
    lost = dataclasses.replace(first, model=torch_runs)
    said = repro_table.judge(second, "e-second", {"verdict": "NOT REPRODUCED"}, report, {"e-first": lost, "e-second": second})
    assert (said.gate, said.agrees) == ("in range, masked by another entry", True)
    unmodeled = dataclasses.replace(report.cells[("cc", "legacy")].tests[0], modeled=None)
    report.cells[("cc", "legacy")].tests[0] = unmodeled
    said = repro_table.judge(second, "e-second", {"verdict": "REPRODUCED"}, report, {"e-first": first, "e-second": second})
    assert said.gate == "in range, masked by another entry"


def test_a_known_test_whose_raise_an_entrys_model_exposed_shows_that_entry() -> None:
    """Where the reference's own failure hid thunder's raise, the gate judged it against a covering entry's model, which
    exposed it: the test is known as the raise's entry, and the modeled entry's defect is there too (``exposed_by``)."""
    report = ParityReport(environment={"versions": STACK}, exitstatus=0)
    exposed = TestOutcome("t/cp", "known", "m", known_defect="e-known", bounded=True, exposed_by=["e-pass"])
    report.record("cp", "legacy", exposed)
    said = repro_table.judge(REGISTRY["e-pass"], "e-pass", {"verdict": "REPRODUCED"}, report, REGISTRY)
    assert (said.gate, said.agrees) == ("known", True)
    assert "1 known as e-known (its raise exposed by this entry's model)" in said.details, said.details
    report.cells[("cp", "legacy")].tests[0] = dataclasses.replace(exposed, exposed_by=None)
    said = repro_table.judge(REGISTRY["e-pass"], "e-pass", {"verdict": "REPRODUCED"}, report, REGISTRY)
    assert said.gate == "in range, masked by another entry"
