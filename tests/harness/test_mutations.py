"""Every trace-tier check fails under the regression it exists for, injected into the real thunder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.envprobe import environment
from teparity.mutations import CATALOG

REPO = Path(__file__).resolve().parents[2]
PLACEMENT = ("bwd-sync-placement[1proc]", "bwd-sync-placement[ddp]")
RUNS_ONCE = ("bwd-sync-runs-once[1proc]", "bwd-sync-runs-once[ddp]")

#: mutation -> (checks it must turn red, a line the failure must show)
KILLS = {
    "sync-after-return": ((*PLACEMENT, *RUNS_ONCE), "comes after the return at index"),
    "sync-missing": ((*PLACEMENT, *RUNS_ONCE), "expected exactly one te_sync_fp8_meta_bwd, found 0"),
    "sync-duplicated": ((*PLACEMENT, *RUNS_ONCE), "expected exactly one te_sync_fp8_meta_bwd, found 2"),
}

pytestmark = [
    pytest.mark.multirank,
    pytest.mark.skipif(bool(environment().backward_sync_reason()), reason=str(environment().backward_sync_reason())),
]


#: Entries that need TE on an FP8 GPU; test_gpu_kills.py holds their kill expectations.
GPU_ONLY = {
    "checker-declines",
    "first-module-token-kept",
    "functional-amax-update-dropped",
    "functional-no-cross-rank-reduction",
    "functional-scale-perturbed",
    "legacy-scale-perturbed",
}


def test_every_catalog_entry_has_a_kill_expectation() -> None:
    assert sorted(set(KILLS) | GPU_ONLY) == sorted(CATALOG)


@pytest.mark.parametrize("mutation", sorted(KILLS))
def test_the_trace_tier_kills(mutation: str, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/trace", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
         f"--teparity-inject={mutation}", f"--teparity-report={report_path}", f"--basetemp={tmp_path / 'base'}"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, f"exit {completed.returncode}; the mutant survived?\n{output[-3000:]}"
    must_fail, message = KILLS[mutation]
    assert message in output, output[-3000:]
    report = json.loads(report_path.read_text())
    outcomes = {r["check"]: r["outcome"] for r in report["results"] if r["executor"] == "legacy"}
    survived = [check for check in must_fail if outcomes.get(check) != "FAIL"]
    assert not survived, f"{mutation} survived {survived}; outcomes {outcomes}"
    assert report["environment"]["injected"] == [mutation]
    forward_checks = [c for c in outcomes if c.startswith("fwd-has-no-sync")]
    assert all(outcomes[c] == "pass" for c in forward_checks), outcomes
