"""Every trace-tier check fails under the regression it exists for, injected into the real thunder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from teparity.known.defects.thunderfx_cannot_interpret_torch_2_12_fx_codegen import ENTRY as TORCH_2_12_THUNDERFX
from teparity.mutations.catalog import CATALOG
from harness import REPO

SCENARIOS = ("1proc", "ddp", "fsdp-zero2", "fsdp-zero3")
PLACEMENT = tuple(f"bwd-sync-placement[{scenario}]" for scenario in SCENARIOS)
RUNS_ONCE = tuple(f"bwd-sync-runs-once[{scenario}]" for scenario in SCENARIOS)

#: mutation -> (checks it must turn red, a line the failure must show)
KILLS = {
    "sync-after-return": ((*PLACEMENT, *RUNS_ONCE), "comes after the return at index"),
    "sync-missing": ((*PLACEMENT, *RUNS_ONCE), "expected exactly one te_sync_fp8_meta_bwd, found 0"),
    "sync-duplicated": ((*PLACEMENT, *RUNS_ONCE), "expected exactly one te_sync_fp8_meta_bwd, found 2"),
    "ddp-gradient-not-reduced": (("ddp-transform-matches-torch-ddp",), "step 0 grad of 2.bias: Tensor-likes are not close"),
    "fsdp-gradient-not-reduced": (
        tuple(f"fsdp-transform-matches-torch-fsdp[{v}]" for v in ("zero2", "zero3", "zero2-layer", "zero3-layer")),
        "step 0 grad of 2.bias: Tensor-likes are not close",
    ),
}
#: Checks with no executor column (the transform checks run thunder's default executors).
EXECUTOR_FREE = {"fsdp-gradient-not-reduced", "ddp-gradient-not-reduced"}
#: The check that each mutant's kill-matrix row must name among its killers.
FIRST_KILLER = {name: "bwd-sync-placement[1proc]/legacy" for name in KILLS} | {
    "ddp-gradient-not-reduced": "ddp-transform-matches-torch-ddp",
    "fsdp-gradient-not-reduced": "fsdp-transform-matches-torch-fsdp[zero2]",
}

pytestmark = [
    pytest.mark.multirank,
    pytest.mark.legacy_sync,
]


#: Entries that need TE on an FP8 GPU; test_gpu_kills.py holds their kill expectations.
GPU_ONLY = {
    "cuda-graph-transform-inert",
    "jit-leaves-te-modules-eager",
    "amax-updates-duplicated",
    "inference-8bit-weight-scale-off",
    "autocast-linear-not-downcast",
    "checkpointing-transform-skipped",
    "autocast-recipe-dropped",
    "autocast-wrapper-dropped",
    "checker-declines",
    "forward-linear-recomputed",
    "fp8-group-ignored",
    "first-module-token-kept",
    "functional-amax-update-dropped",
    "functional-backward-update-missing",
    "functional-no-cross-rank-reduction",
    "functional-scale-perturbed",
    "legacy-scale-perturbed",
    "recipe-change-state-kept",
    "fsdp-forward-amax-not-reduced",
    "no-grad-torch-linear-off",
    "recipe-change-state-of-another-history",
    "no-sync-weight-grads-scaled",
    "fp8-group-amax-summed",
    "state-dict-initial-weights",
    "recompile-carries-another-state",
    "frozen-parameters-trained",
    "thunderfx-recompiles-every-call",
    "thunderfx-jits-the-whole-module",
}


def test_every_catalog_entry_has_a_kill_expectation() -> None:
    assert sorted(set(KILLS) | GPU_ONLY) == sorted(CATALOG)


def test_the_kill_matrix_kills_every_trace_tier_mutant_with_its_own_evidence(tmp_path: Path) -> None:
    """The CLI end to end on the whole trace tier: the clean run passes, and each applicable mutant fails
    exactly the checks that exist for it, with the evidence it must show, while the forward checks pass.
    One kill-matrix run judges every mutant (a run per mutant, two at a time) from its own report and log."""
    # Where thunderfx cannot run on this torch, the thunderfx mutant's killers are that known defect's xfails: it is
    # left out here (on torch 2.11 this test kills it on the CPU).
    masked = {"thunderfx-recompiles-every-call", "thunderfx-jits-the-whole-module"} if TORCH_2_12_THUNDERFX.holds_here() else set()
    only = ["--only", ",".join(sorted(set(CATALOG) - masked))] if masked else []
    completed = subprocess.run(
        # FSDP's BLOCK bucketing rows kill no trace-tier mutant that LAYER's do not (KILLS): left out of every run.
        [sys.executable, "-m", "teparity", "kill-matrix", "tests/trace", "--workdir", str(tmp_path), "--jobs", "2",
         *only, "--pytest-args", "-p no:xdist -k 'not block'"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[1].startswith("(clean run)") and " pass " in lines[1]
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith("reports:")}
    for name in GPU_ONLY - masked:
        assert " n/a " in rows[name] or " killed " in rows[name], rows[name]
    for mutation, (must_fail, message) in KILLS.items():
        assert " killed " in rows[mutation] and FIRST_KILLER[mutation] in rows[mutation], rows[mutation]
        log = (tmp_path / f"{mutation}.log").read_text()
        assert message in log, log[-3000:]
        report = json.loads((tmp_path / f"{mutation}.json").read_text())
        assert report["environment"]["injected"] == [mutation]
        executor = "-" if mutation in EXECUTOR_FREE else "legacy"
        outcomes = {r["check"]: r["outcome"] for r in report["results"] if r["executor"] == executor}
        survived = [check for check in must_fail if outcomes.get(check) != "FAIL"]
        assert not survived, f"{mutation} survived {survived}; outcomes {outcomes}"
        forward_checks = [c for c in outcomes if c.startswith("fwd-has-no-sync")]
        assert all(outcomes[c] == "pass" for c in forward_checks), outcomes


def test_a_targeted_kill_matrix_runs_the_killed_by_rows_and_the_whole_gate_only_where_they_do_not_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real runs of trace-tier tests under ``targeted``: ``sync-missing`` dies in a run of its ``killed_by`` rows
    alone; ``ddp-gradient-not-reduced``, given a stale ``killed_by`` (``te-trace-invariants``, which it leaves as it
    was), dies only in the whole gate, and its row says so. Checked against a targeted run without
    ``--teparity-rows`` (the whole gate: a fwd-has-no-sync row in its report) and against no fallback (the second
    SURVIVED)."""
    import dataclasses

    from teparity import checks
    from teparity.tools import killmatrix

    stale = dataclasses.replace(CATALOG["ddp-gradient-not-reduced"], killed_by=("te-trace-invariants",))
    monkeypatch.setattr(killmatrix, "CATALOG", {"sync-missing": CATALOG["sync-missing"], "ddp-gradient-not-reduced": stale})
    monkeypatch.chdir(REPO)
    paths = [f"tests/trace/test_{name}.py" for name in ("legacy_backward_sync", "ddp_transform", "te_trace_invariants")]
    table, ok = killmatrix.kill_matrix(paths, tmp_path, ["-p", "no:xdist"], jobs=2, progress=lambda line: None, targeted=True)
    lines = table.splitlines()
    rows = {line.split()[0]: line for line in lines[2:]}
    assert ok and lines[1].startswith("(clean run)") and " pass " in lines[1], table
    assert " killed " in rows["sync-missing"] and "bwd-sync-placement[1proc]/legacy" in rows["sync-missing"], table
    assert rows["sync-missing"].endswith("(its killed_by)") and not (tmp_path / "sync-missing.json").exists(), table
    ran = {r["check"] for r in json.loads((tmp_path / "sync-missing.targeted.json").read_text())["results"]}
    assert ran and all(any(checks.matches(p, row) for p in CATALOG["sync-missing"].killed_by) for row in ran), ran
    assert " killed " in rows["ddp-gradient-not-reduced"] and "ddp-transform-matches-torch-ddp" in rows["ddp-gradient-not-reduced"]
    assert "(the whole gate only: its killed_by te-trace-invariants did not kill it; catalog drift)" in table, table
    targeted = json.loads((tmp_path / "ddp-gradient-not-reduced.targeted.json").read_text())["results"]
    assert targeted and all(r["check"].startswith("te-trace-invariants") and r["outcome"] in ("pass", "skip") for r in targeted)


@pytest.mark.parametrize("honours", [False, True])
def test_the_fp8_group_mutant_applies_only_to_a_build_that_honours_the_group(honours: bool) -> None:
    """No thunder build honours fp8_group yet; the entry must say so, and apply once one does."""
    from teparity.stack.environment import Environment, GpuInfo
    from teparity.stack.executors import ExecutorInfo
    from teparity.stack.versions import Versions

    functional = ExecutorInfo("functional", "m", "a", executor_present=True, honors_fp8_group=honours)
    env = Environment(
        versions=Versions(torch="2.11.0", thunder="0.2.6", transformer_engine="2.9.0"),
        gpus=(GpuInfo("NVIDIA H200", (9, 0)),),
        executors={"legacy": ExecutorInfo("legacy", "m", "a", executor_present=True), "functional": functional},
        te_import_error=None,
        thunder_import_error=None,
    )
    reason = CATALOG["fp8-group-ignored"].unavailable_reason(env)
    if honours:
        assert reason is None
    else:
        assert reason is not None and "needs a build that honours fp8_group" in reason and "0.2.6" in reason


def test_first_kill_counts_a_run_that_xdist_stopped_after_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--first-kill``: xdist ends a run stopped by ``--maxfail=1`` with exit 2, which is a kill when a
    check failed; exit 2 for anything else (a usage error) stays an error, and without the flag so does
    every exit 2."""
    from teparity.mutations.catalog import Mutation
    from teparity.tools import killmatrix
    from teparity.tools.gate_runs import GateRun

    failed = {"results": [{"check": "numerics[delayed]", "executor": "functional", "outcome": "FAIL",
                           "tests": [{"nodeid": "t::a", "outcome": "FAIL"}]}]}
    clean = {"results": [{"check": "numerics[delayed]", "executor": "functional", "outcome": "pass",
                          "tests": [{"nodeid": "t::a", "outcome": "pass"}]}]}
    runs = {
        None: GateRun(None, 0, "1 passed", clean),
        "stopped": GateRun("stopped", 2, "xdist.dsession.Interrupted: stopping after 1 failures", failed),
        "usage": GateRun("usage", 2, "ERROR: usage: pytest ...", failed),
    }
    monkeypatch.setattr(killmatrix, "run_gate", lambda paths, workdir, name, args: runs[name])
    monkeypatch.setattr("teparity.stack.envprobe.environment", lambda: None)
    catalog = {name: Mutation(name, name, "te", lambda: None) for name in ("stopped", "usage")}
    monkeypatch.setattr(Mutation, "unavailable_reason", lambda self, env: None)
    monkeypatch.setattr(killmatrix, "CATALOG", catalog)

    table, ok = killmatrix.kill_matrix(["t"], tmp_path, first_kill=True, progress=lambda line: None)
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert " killed " in rows["stopped"] and "numerics[delayed]/functional" in rows["stopped"], table
    assert "ERROR (exit 2)" in rows["usage"] and not ok, table
    table, _ = killmatrix.kill_matrix(["t"], tmp_path, first_kill=False, progress=lambda line: None)
    assert "ERROR (exit 2)" in {line.split()[0]: line for line in table.splitlines()[1:]}["stopped"], table


def test_a_check_that_xpasses_or_fails_killed_the_mutant_and_a_known_one_did_not() -> None:
    """A strict xfail whose defect stopped showing (XPASS) fails the run as a FAIL does; a known row does not."""
    from teparity.tools.gate_runs import GateRun

    def row(check: str, outcome: str) -> dict:
        return {"check": check, "executor": "functional", "outcome": outcome,
                "tests": [{"nodeid": f"t::{check}", "outcome": outcome}]}

    run = GateRun("m", 1, "", {"results": [row("a", "XPASS"), row("b", "FAIL"), row("c", "known"), row("d", "pass")]})
    assert run.failed_checks() == ["a/functional", "b/functional"]
    assert run.failed_tests() == {"t::a", "t::b"}


def test_the_readme_lists_the_whole_catalog_as_python_m_teparity_mutations_prints_it() -> None:
    from teparity.mutations.catalog import markdown_table

    readme = (REPO / "README.md").read_text()
    start, end = "<!-- mutations: generated by python -m teparity mutations -->\n", "<!-- end of mutations -->"
    assert readme[readme.index(start) + len(start):readme.index(end)] == markdown_table(), (
        "regenerate the README's table: python -m teparity mutations")
    assert all(f"| `{name}` |" in readme for name in CATALOG)
