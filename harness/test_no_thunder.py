"""Never green without thunder, or with a thunder that does not import under its torch. In a Python where
lightning-thunder is not installed (as in a CI job that forgot it, or that ran the gate with another Python) every check
would skip and the run pass; instead the gate stops at start-up, red, with what to install, ``doctor`` exits 1 saying
the same, and the job summary of the run's report says RED. A run without thunder on purpose asks for it by its
option. Under a torch too new for it thunder is installed but fails to import: every test fails with its error."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from teparity.report.table import CONTINUED_INDENT, HEADER_INDENT, unwrapped
from harness import REPO



def _run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python`` with this checkout's teparity, from the repository root, as the gate runs."""
    return subprocess.run([str(python), *args], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("absent", [("lightning-thunder",), ("lightning-thunder", "torch")], ids=["no-thunder", "no-torch"])
def test_the_gate_without_thunder_stops_red_and_doctor_and_the_summary_say_so(
    venv_without: Callable[..., Path], tmp_path: Path, absent: tuple[str, ...]
) -> None:
    python = venv_without(*absent)
    missing = "lightning-thunder is" if len(absent) == 1 else "torch and lightning-thunder are"
    reason = f"{missing} not installed in {python}: install the thunder under test into it"
    report = tmp_path / "report.json"
    gate = _run(python, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'base'}",
                f"--teparity-report={report}")
    assert gate.returncode == pytest.ExitCode.USAGE_ERROR, gate.stdout[-3000:] + gate.stderr[-3000:]
    errors = [line for line in gate.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: teparity: {reason}"), gate.stderr
    assert "--teparity-allow-no-thunder" in errors[0]
    said = unwrapped(unwrapped(gate.stdout), CONTINUED_INDENT)
    assert "THE GATE CANNOT TEST HERE (no lightning-thunder): it stops at start-up, red" in said, said
    assert f"teparity: RED (exit 4, usage error): the gate stopped before it tested: {reason}" in said, said
    assert f"; parity report JSON: {report}" in said and "passed" not in said and "skipped" not in said, said

    doctor = _run(python, "-m", "teparity", "doctor")
    assert doctor.returncode == 1 and f"THE GATE STOPS here, red: {reason}" in doctor.stdout, doctor.stdout + doctor.stderr
    summary = _run(python, "-m", "teparity", "summary", str(report))
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.startswith(f"## teparity: RED (exit 4, usage error): the gate stopped before it tested: {reason}"), summary.stdout


def test_a_run_without_thunder_on_purpose_skips_every_check_and_says_so(venv_without: Callable[..., Path], tmp_path: Path) -> None:
    python = venv_without("lightning-thunder")
    gate = _run(python, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'base'}",
                "tests/trace", "--teparity-allow-no-thunder")
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-3000:]
    said = unwrapped(unwrapped(gate.stdout, HEADER_INDENT), CONTINUED_INDENT)
    assert "teparity: NO THUNDER, every check skips (--teparity-allow-no-thunder)" in said, said
    assert "teparity: GREEN (exit 0): 0 FAIL, 0 XPASS; 0 pass, 0 known, " in said, said
    assert "skip (no lightning-thunder: --teparity-allow-no-thunder)" in said and " passed" not in said, said


#: A torch that no declared thunder imports (they import up to 2.12), installed without the network where pip finds it.
NEWEST_TORCH = "2.13.0"


def test_the_gate_on_a_torch_thunder_does_not_import_is_red_with_the_reason(venv_without: Callable[..., Path], tmp_path: Path) -> None:
    """A user who upgrades torch first: thunder is installed but fails to import under it, and the gate fails every
    test with thunder's own error, says so in its verdict, and ``doctor`` exits 1 saying the same."""
    python = venv_without("torch")
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps",
                          f"torch=={NEWEST_TORCH}"], capture_output=True, text=True)
    if pip.returncode:
        pytest.skip(f"no torch {NEWEST_TORCH} wheel offline for this Python: {pip.stderr.strip()[-300:]}")
    gate = _run(python, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'base'}",
                "tests/trace/test_thunderfx.py")
    said = unwrapped(unwrapped(gate.stdout), CONTINUED_INDENT)
    assert gate.returncode == pytest.ExitCode.TESTS_FAILED, said[-3000:] + gate.stderr[-3000:]
    assert f"torch {NEWEST_TORCH}" in said and "the system under test is installed but does not import: lightning-thunder" in said, said
    assert "teparity: RED (exit 1): 2 FAIL, 0 XPASS; the system under test does not import or is an unsupported pair: " in said, said
    doctor = _run(python, "-m", "teparity", "doctor")
    assert doctor.returncode == 1 and "EVERY GATE TEST FAILS here: lightning-thunder" in doctor.stdout, doctor.stdout + doctor.stderr
