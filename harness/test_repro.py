"""``python -m teparity repro ID``: each known defect's standalone reproduction (``teparity.known.repro``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.known import repro
from teparity.known.registry import BY_ID
from teparity.stack.versions import Versions
from harness import REPO

SRC = REPO / "src"


def _teparity(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "teparity", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("entry_id", repro.available())
def test_a_reproduction_is_a_short_script_of_torch_thunder_and_te_alone(entry_id: str) -> None:
    """What a thunder developer pastes into an upstream issue: it names a registry entry, compiles, imports no teparity,
    fits in 150 lines, and says each verdict it can reach."""
    assert entry_id in BY_ID
    source = repro.script(entry_id)
    tree = ast.parse(source)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "teparity" not in imported
    assert len(repro.source(entry_id).splitlines()) < 150
    assert all(verdict in source for verdict in ("REPRODUCED:", "NOT REPRODUCED:", "CANNOT RUN HERE:"))


@pytest.mark.parametrize("entry_id", [e for e in repro.available() if BY_ID[e].without_te])
def test_a_reproduction_without_te_says_here_what_its_entrys_range_says(entry_id: str) -> None:
    """On this stack (CI: the default environment) a thunder-only defect reproduces exactly where its entry's range
    holds; elsewhere the script says NOT REPRODUCED."""
    pytest.importorskip("thunder")
    status, output = repro.run(entry_id, timeout_s=300)
    holds = BY_ID[entry_id].holds_for_versions(Versions.installed())
    assert status == (0 if holds else 1), output[-2000:]
    assert output.rstrip().splitlines()[-1].startswith("REPRODUCED:" if holds else "NOT REPRODUCED:")


@pytest.mark.parametrize("entry_id", [e for e in repro.available() if not BY_ID[e].without_te])
def test_a_reproduction_that_needs_an_fp8_gpu_says_it_cannot_run_where_there_is_none(entry_id: str) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        pytest.skip("an FP8 GPU is here: the reproduction runs (its verdicts are the GPU runs' under docs/results)")
    status, output = repro.run(entry_id, timeout_s=300)
    assert status == 2 and output.rstrip().splitlines()[-1].startswith("CANNOT RUN HERE: "), output[-2000:]


def test_the_written_script_opens_with_its_entry(tmp_path: Path) -> None:
    entry_id = repro.available()[0]
    out = tmp_path / "repro.py"
    done = _teparity("repro", entry_id, "--out", str(out))
    assert done.returncode == 0, done.stderr
    head = out.read_text().split("\n\n", 1)[0]
    assert head.startswith(f"# Reproduction of {entry_id}: ") and "# Cause: " in head and BY_ID[entry_id].thunder in head


def test_every_entry_has_a_reproduction() -> None:
    assert sorted(BY_ID) == repro.available()


def test_an_unknown_id_is_a_usage_error() -> None:
    unknown = _teparity("repro", "no-such-entry")
    assert unknown.returncode == 2 and "no registry entry 'no-such-entry'" in unknown.stderr and "usage:" in unknown.stderr


def test_a_shared_script_sets_each_entrys_executor() -> None:
    """One script reproduces both executors' loss of TE; each entry's copy runs its own executor."""
    for entry_id, (name, executor) in repro.SHARED.items():
        assert (repro.REPROS / f"{name}.py").exists() and entry_id in BY_ID and entry_id.startswith(f"{executor}-")
        assert f'\nEXECUTOR = "{executor}"\n' in repro.source(entry_id)
    assert not [path.stem for path in repro.REPROS.glob("*.py")
                if path.stem not in BY_ID and path.stem not in {name for name, _ in repro.SHARED.values()}]


def test_the_issue_body_carries_the_environment_the_verdict_here_and_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    entry_id = repro.available()[0]
    body = repro.issue_body(entry_id, "torch 2.11.0, lightning-thunder 0.2.6", 0, "a warning\nREPRODUCED: 3 differ\n")
    assert body.startswith("# ") and "torch 2.11.0, lightning-thunder 0.2.6" in body
    assert "`REPRODUCED` (exit 0)" in body and "REPRODUCED: 3 differ" in body and "a warning" not in body
    assert repro.script(entry_id).rstrip() in body


def test_a_known_cells_footnote_ends_with_the_command_that_writes_its_reproduction(monkeypatch: pytest.MonkeyPatch) -> None:
    from teparity.report.parity import ParityReport, TestOutcome
    from teparity.report.table import Footnotes, cell_text

    with_one, without = repro.available()[:2]
    monkeypatch.setattr(repro, "available", lambda: [with_one])
    report = ParityReport(environment={})
    report.record("c1", "legacy", TestOutcome("k1", "known", "m", known_defect=with_one, bounded=True))
    report.record("c2", "legacy", TestOutcome("k2", "known", "m", known_defect=without, bounded=True))
    notes = Footnotes()
    for check in ("c1", "c2"):
        cell_text(report.cells[(check, "legacy")], notes)
    assert list(notes.texts) == [
        f"known upstream defect {with_one}; bounded; reproduce it alone: python -m teparity repro {with_one}",
        f"known upstream defect {without}; bounded"]
