"""The kill matrix's verdicts, from stand-in runs of the gate: ``--targeted`` runs a mutant's ``killed_by`` rows first
and the whole gate only where they do not kill it, so that a stale ``killed_by`` costs time, never a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from teparity.mutations.catalog import Mutation
from teparity.tools import killmatrix
from teparity.tools.gate_runs import GateRun


def _report(outcome: str, check: str = "numerics[delayed]") -> dict:
    return {"results": [{"check": check, "executor": "functional", "outcome": outcome,
                         "tests": [{"nodeid": f"t::{check}", "outcome": outcome}]}]}


#: (mutant, its killed_by, its targeted run's (exit, outcome), its whole run's (exit, outcome))
MUTANTS = {
    "declared": (("numerics[delayed]",), (1, "FAIL"), (1, "FAIL")),
    "drift": (("fsdp[*]",), (0, "pass"), (1, "FAIL")),
    "drift-no-rows": (("fsdp-llama[*]",), (5, None), (1, "FAIL")),  # its rows are not in the paths: pytest exit 5
    "survivor": (("ddp-first-step",), (0, "pass"), (0, "pass")),
}


@pytest.fixture
def gate_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, str | None, list[str]]]:
    """Stand-in gate runs of ``MUTANTS`` (the clean run passes); each call's (mutation, run name, pytest args)."""
    calls: list[tuple[str | None, str | None, list[str]]] = []

    def run_gate(paths: list[str], workdir: Path, mutation: str | None, args: list[str], *, name: str | None = None) -> GateRun:
        calls.append((mutation, name, list(args)))
        if mutation is None:
            return GateRun(None, 0, "1 passed", _report("pass"))
        targeted = any(arg.startswith("--teparity-rows=") for arg in args)
        exit_status, outcome = MUTANTS[mutation][1 if targeted else 2]
        return GateRun(mutation, exit_status, f"exit {exit_status}", _report(outcome) if outcome else {})

    monkeypatch.setattr(killmatrix, "run_gate", run_gate)
    monkeypatch.setattr("teparity.stack.envprobe.environment", lambda: None)
    monkeypatch.setattr(Mutation, "unavailable_reason", lambda self, env: None)
    monkeypatch.setattr(killmatrix, "CATALOG", {name: Mutation(name, name, "te", lambda: None, killed_by=declared)
                                               for name, (declared, _, _) in MUTANTS.items()})
    return calls


def _rows(table: str) -> dict[str, str]:
    return {line.split()[0]: line for line in table.splitlines()[1:]}


def test_a_mutant_its_killed_by_kills_runs_no_whole_gate_and_a_stale_killed_by_falls_back_to_it(
    tmp_path: Path, gate_runs: list
) -> None:
    """Checked against: no fallback (``drift`` SURVIVED), a fallback row without its drift note, a whole-gate run
    after a targeted kill, a survivor reported killed, and a clean run limited to some rows."""
    table, ok = killmatrix.kill_matrix(["t"], tmp_path, jobs=3, progress=lambda line: None, targeted=True)
    rows = _rows(table)
    assert rows["declared"].split()[1] == "killed" and rows["declared"].endswith("numerics[delayed]/functional (its killed_by)"), table
    for name, declared in (("drift", "fsdp[*]"), ("drift-no-rows", "fsdp-llama[*]")):
        assert rows[name].split()[1] == "killed" and rows[name].endswith(
            f"numerics[delayed]/functional (the whole gate only: its killed_by {declared} did not kill it; catalog drift)"), table
    assert rows["survivor"].split()[1] == "SURVIVED" and not ok, table
    runs = {(mutation, name): args for mutation, name, args in gate_runs}
    assert not any(arg.startswith("--teparity-rows") for arg in runs[(None, None)]), "the clean run is the whole gate"
    assert "--teparity-rows=numerics[delayed]" in runs[("declared", "declared.targeted")]
    assert ("declared", None) not in runs, "a mutant its killed_by killed needs no whole-gate run"
    for name in ("drift", "drift-no-rows", "survivor"):
        assert (name, f"{name}.targeted") in runs and not any(a.startswith("--teparity-rows") for a in runs[(name, None)])


def test_catalog_drift_alone_does_not_fail_the_matrix_and_without_targeted_no_run_is_limited(
    tmp_path: Path, gate_runs: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked against: a drift row counted as a failure; ``targeted`` left on by default (a rows argument)."""
    monkeypatch.setattr(killmatrix, "CATALOG", {n: m for n, m in killmatrix.CATALOG.items() if n != "survivor"})
    table, ok = killmatrix.kill_matrix(["t"], tmp_path, progress=lambda line: None, targeted=True)
    assert ok, table
    gate_runs.clear()
    table, ok = killmatrix.kill_matrix(["t"], tmp_path, progress=lambda line: None)
    assert ok and "catalog drift" not in table and "its killed_by" not in table, table
    assert not any(arg.startswith("--teparity-rows") for _, _, args in gate_runs for arg in args), gate_runs
    assert {name for _, name, _ in gate_runs} == {None}, "no targeted run names"


def test_first_kill_stops_the_targeted_run_and_its_fallback_at_their_first_failure(tmp_path: Path, gate_runs: list) -> None:
    """Checked against ``--maxfail=1`` given to the whole-gate runs only."""
    killmatrix.kill_matrix(["t"], tmp_path, progress=lambda line: None, first_kill=True, targeted=True)
    for mutation, name, args in gate_runs:
        assert ("--maxfail=1" in args) == (mutation is not None), (mutation, name, args)


def test_the_cli_flag_asks_for_a_targeted_matrix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Checked against the flag parsed but not passed on."""
    from teparity import __main__ as cli

    seen = []
    monkeypatch.setattr(killmatrix, "kill_matrix", lambda *args, **kwargs: seen.append(kwargs) or ("table", True))
    assert cli.main(["kill-matrix", "tests/trace", "--workdir", str(tmp_path), "--targeted", "--first-kill"]) == 0
    assert seen[-1]["targeted"] and seen[-1]["first_kill"], seen
    assert cli.main(["kill-matrix", "tests/trace", "--workdir", str(tmp_path)]) == 0
    assert not seen[-1]["targeted"], seen


def test_only_runs_the_named_mutants_beside_the_whole_clean_run(tmp_path: Path, gate_runs: list) -> None:
    """Checked against ``only`` ignored (every mutant runs) and a clean run cut to the named mutants' rows."""
    table, ok = killmatrix.kill_matrix(["t"], tmp_path, progress=lambda line: None, targeted=True, only=("declared",))
    assert ok and set(_rows(table)) == {"(clean", "declared"}, table
    assert {mutation for mutation, _, _ in gate_runs} == {None, "declared"}, gate_runs
    assert not any(arg.startswith("--teparity-rows") for mutation, _, args in gate_runs if mutation is None for arg in args)


def test_the_cli_takes_catalog_names_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An unknown name is a usage error naming the catalog; known names reach the matrix."""
    from teparity import __main__ as cli

    seen = []
    monkeypatch.setattr(killmatrix, "kill_matrix", lambda *args, **kwargs: seen.append(kwargs) or ("table", True))
    assert cli.main(["kill-matrix", "--workdir", str(tmp_path), "--only", "sync-missing,checker-declines"]) == 0
    assert seen[-1]["only"] == ("sync-missing", "checker-declines"), seen
    with pytest.raises(SystemExit) as stopped:
        cli.main(["kill-matrix", "--only", "sync-missing,no-such-mutant"])
    assert stopped.value.code == 2 and "no mutation named no-such-mutant; the catalog: " in capsys.readouterr().err
