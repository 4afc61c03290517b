"""On an FP8 GPU: each numerics / ddp check fails under a mutation of the real run, and a rank whose
backward skips the FP8 sync fails the run within the deadline with every rank's stack. The strategy rows'
expectations, run on thunder 0.2.6 + TE 2.9.0: docs/results/h100-te2.9.0-22969b6-gpu-kills."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from teparity.inrank.scenarios import legacy_ddp_with_sync_skipped_on_last_rank
from teparity.launch.fresh import run_ranks
from teparity.launch.outcome import STACK_DUMP_WAIT_S, RanksFailed
from teparity.mutations.catalog import CATALOG
from teparity.records import Case, PairSpec
from teparity.tools.gate_runs import run_gate
from harness import REPO

pytestmark = [pytest.mark.fp8, pytest.mark.multirank]
NUMERICS = "tests/numerics/test_numerics_parity.py::test_thunder_matches_eager_te"
FIRST_STEP = "tests/ddp/test_ddp_parity.py::test_first_ddp_step_matches_torch_ddp"
TRACES = "tests/trace/test_te_trace_invariants.py::test_te_trace_invariants"
FP8_GROUP = "tests/ddp/test_ddp_parity.py::test_amax_reduction_stays_in_the_fp8_group"
CHECKPOINTING = "tests/features/test_feature_parity.py::test_activation_checkpointing_matches_eager_te"
RECIPE_CHANGE = "tests/features/test_feature_parity.py::test_recipe_changes_between_steps_match_eager_te"
AUTOCAST = "tests/features/test_feature_parity.py::test_training_under_torch_autocast_matches_eager_te"

FSDP = "tests/fsdp/test_fsdp_parity.py::test_fsdp_matches_the_reference"
INFERENCE = "tests/features/test_feature_parity.py::test_no_grad_forward_matches_eager_te"
LLAMA_GRAD_ACCUMULATION = "tests/ddp/test_ddp_parity.py::test_llama_block_gradient_accumulation_matches_no_sync"
RESUME = "tests/features/test_feature_parity.py::test_resume_from_checkpoint_matches_eager_te"
NEW_SHAPE = "tests/features/test_feature_parity.py::test_new_input_shape_between_steps_matches_eager_te"
ADAPTER = "tests/features/test_feature_parity.py::test_frozen_base_with_adapter_matches_eager_te"
TWICE = "tests/features/test_feature_parity.py::test_linear_called_twice_matches_eager_te"
DDP_THUNDERFX = "tests/ddp/test_ddp_parity.py::test_torch_ddp_around_thunderfx_matches_torch_ddp"
FSDP_CHECKPOINTING = "tests/fsdp/test_fsdp_parity.py::test_fsdp_with_activation_checkpointing_matches_the_reference_without"
INFERENCE_8BIT = "tests/features/test_feature_parity.py::test_8bit_inference_matches_its_eager_model"
SWITCHED = "tests/features/test_feature_parity.py::test_fp8_switched_by_step_matches_eager_te"
OFF_ENDS = "tests/features/test_feature_parity.py::test_layers_kept_out_of_fp8_match_eager_te"
DDP_SWITCHED = "tests/ddp/test_ddp_parity.py::test_fp8_switched_by_step_under_ddp_matches_torch_ddp"
TE_MODULES = "tests/features/test_feature_parity.py::test_te_module_networks_match_eager_te"
CUDA_GRAPHS = "tests/features/test_feature_parity.py::test_cuda_graphs_match_eager_te"
#: The FP8-switching rows each scale mutation kills against their models (docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows).
SWITCHING_KILLS = {
    "legacy": (f"{SWITCHED}[legacy-off]", f"{SWITCHED}[legacy-warm-up]", f"{OFF_ENDS}[legacy]", f"{DDP_SWITCHED}[legacy-warm-up]"),
    "functional": (f"{SWITCHED}[functional-warm-up]", f"{OFF_ENDS}[functional]", f"{DDP_SWITCHED}[functional-warm-up]"),
}
#: A known test's kill: thunder no longer matches the entry's model (``teparity.gate.pairs.ModelParted``).
OFF_THE_MODEL = "thunder differs from the model of known upstream defect"

#: mutation -> (tests that must fail, any of these lines must be in the output). The killing tests pass on a clean
#: run of thunder 0.2.6 with TE 2.9 (the functional executor's multi-step numerics do not: docs/results/), so that
#: each kill means the mutation, not a failure already there; those of KNOWN_CLEAN are known defects there, and a
#: mutant fails them outside the entry's signature.
KILLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "legacy-scale-perturbed": ((f"{NUMERICS}[legacy-delayed]", f"{FIRST_STEP}[legacy]", *SWITCHING_KILLS["legacy"]),
                               (" scale differs (rule:",)),
    "sync-missing": ((f"{NUMERICS}[legacy-delayed]",), ("found 0 (none)",)),
    "sync-after-return": ((f"{FIRST_STEP}[legacy]",), ("comes after the return",)),
    "first-module-token-kept": ((f"{FIRST_STEP}[legacy]",), ("backward syncs per step", "amax_history differs")),
    # Without the wrapper TE's modules take their non-FP8 path, which returns fewer tensors: it raises.
    "autocast-wrapper-dropped": ((f"{TRACES}[legacy]",), ("the thunder run raised",)),
    "autocast-recipe-dropped": ((f"{TRACES}[legacy]",), ("forward-in-fp8-autocast",)),
    "functional-scale-perturbed": ((f"{FIRST_STEP}[functional]", *SWITCHING_KILLS["functional"]), (" scale differs (rule: bitwise",)),
    "functional-amax-update-dropped": ((f"{FIRST_STEP}[functional]",), ("amax_history differs",)),
    "functional-no-cross-rank-reduction": ((f"{FIRST_STEP}[functional]", f"{DDP_THUNDERFX}[functional]"), ("vs rank 0",)),
    "functional-backward-update-missing": ((f"{TRACES}[functional]", f"{FIRST_STEP}[functional]"), ("te_fp8_amax_and_scale_update for",)),
    "forward-linear-recomputed": ((f"{TRACES}[functional]",), ("forward TE linears recomputed (at",)),
    "checkpointing-transform-skipped": ((f"{CHECKPOINTING}[functional-jit-delayed]", f"{FSDP_CHECKPOINTING}[functional-zero3]"),
                                        ("one-update-per-fp8-state",)),
    "amax-updates-duplicated": ((f"{FIRST_STEP}[functional]", f"{TWICE}[functional]"), ("amax_history differs",)),
    "checker-declines": ((f"{TRACES}[legacy]", f"{TRACES}[functional]"), ("silent fallback",)),
    "recipe-change-state-kept": ((f"{RECIPE_CHANGE}[functional-alternate]",), ("output: Tensor-likes are not equal",)),
    # Not downcasting is eager TE's own behaviour: the entry's defect is gone, an XPASS.
    "autocast-linear-not-downcast": ((f"{AUTOCAST}[functional]",), ("input grad: Tensor-likes are not close", "XPASS")),
    "no-grad-torch-linear-off": ((f"{INFERENCE}[functional-delayed]",), (OFF_THE_MODEL,)),
    "recipe-change-state-of-another-history": ((f"{RECIPE_CHANGE}[functional-alternate]", f"{RECIPE_CHANGE}[functional-rebuilt]",
                                                f"{RECIPE_CHANGE}[functional-type]", f"{SWITCHED}[functional-no-autocast]"),
                                               (OFF_THE_MODEL,)),
    # The small network's bf16 weight gradients round a 1 + 2**-10 factor away here: only the llama block's show it
    # (docs/results/h100-te2.9.0-te2.20.2-9f885b1-reference-reuse/gpu-kills; TE 2.20.2 kills both, h200-te2.20.2-2bafd7a-killmatrix).
    "no-sync-weight-grads-scaled": ((f"{LLAMA_GRAD_ACCUMULATION}[functional]",), (OFF_THE_MODEL,)),
    "fp8-group-amax-summed": ((f"{FP8_GROUP}[functional-per-rank]",), (OFF_THE_MODEL,)),
    "fsdp-forward-amax-not-reduced": ((f"{FSDP}[functional-zero2]",), ("vs rank 0", "amax_history differs")),
    "state-dict-initial-weights": ((f"{RESUME}[functional-thunder]", f"{RESUME}[functional-eager]"), (OFF_THE_MODEL,)),
    "recompile-carries-another-state": ((f"{NEW_SHAPE}[functional-sequence-length-default]",), (OFF_THE_MODEL,)),
    "frozen-parameters-trained": ((f"{ADAPTER}[functional]",), ("thunder has gradients for",)),
    # Every step starts a fresh FP8 state: step 1 parts from torch DDP + eager TE (h100-matrix-a42f2cc's kill matrices).
    "thunderfx-recompiles-every-call": ((f"{DDP_THUNDERFX}[functional]", f"{DDP_THUNDERFX}[legacy]"), ("amax_history differs",)),
    "inference-8bit-weight-scale-off": ((f"{INFERENCE_8BIT}[bfloat16]", f"{INFERENCE_8BIT}[float32]"),
                                        ("parts from its eager model",)),
    "thunderfx-jits-the-whole-module": ((f"{TE_MODULES}[thunderfx-linear]", f"{TE_MODULES}[thunderfx-layernorm-mlp]"),
                                        ("thunder raised",)),
    # The known raises of these rows, turned into a silent run without what was asked for.
    "jit-leaves-te-modules-eager": ((f"{TE_MODULES}[jit-linear]", f"{TE_MODULES}[jit-layernorm-mlp]"),
                                    ("thunder.jit compiled nothing",)),
    # With TE 2.10+ the legacy executor holds no TE (legacy-executor-loses-te-from-te-2.10): only the functional row dies.
    "cuda-graph-transform-inert": ((f"{CUDA_GRAPHS}[legacy]", f"{CUDA_GRAPHS}[functional]"), ("no CUDAGraph* region",)),
}
KILLING_TESTS = sorted({t for killing, _ in KILLS.values() for t in killing})
#: Killing tests that are strict xfails (known defects) on a clean run of that stack: their clean run must be known,
#: not a pass (lines seen in docs/results/h200-te2.20.2-2bafd7a-killmatrix).
KNOWN_CLEAN = {f"{RECIPE_CHANGE}[functional-alternate]", f"{RECIPE_CHANGE}[functional-rebuilt]",
               f"{RECIPE_CHANGE}[functional-type]", f"{TE_MODULES}[jit-linear]", f"{TE_MODULES}[jit-layernorm-mlp]",
               f"{CUDA_GRAPHS}[legacy]", f"{CUDA_GRAPHS}[functional]", f"{AUTOCAST}[functional]",
               f"{INFERENCE}[functional-delayed]", f"{LLAMA_GRAD_ACCUMULATION}[functional]",
               f"{FP8_GROUP}[functional-per-rank]", f"{TWICE}[functional]", f"{RESUME}[functional-thunder]",
               f"{RESUME}[functional-eager]", f"{NEW_SHAPE}[functional-sequence-length-default]",
               f"{SWITCHED}[functional-no-autocast]", *SWITCHING_KILLS["legacy"], *SWITCHING_KILLS["functional"]}


@pytest.fixture(autouse=True)
def _in_the_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize("test", KILLING_TESTS, ids=lambda t: t.split("::")[-1])
def test_the_clean_run_of_every_killing_test_passes(test: str, tmp_path: Path) -> None:
    """A kill counts only if the same test passes without the mutation: a pass, not a strict xfail (which also exits
    0); a killing test that is a known defect on this stack must be that, and nothing else."""
    run = run_gate([test], tmp_path, None, ["-p", "no:xdist"])
    assert run.returncode == 0, run.output[-6000:]
    expected = "known" if test in KNOWN_CLEAN else "pass"
    assert run.tests_that(expected) == {test}, f"{test} should be {expected}: {run.report.get('results')}"
    if expected == "known":  # and held: by its model, or by a bounded signature
        record = next(t for result in run.report["results"] for t in result["tests"] if t["nodeid"] == test)
        assert record["modeled"] == "pass" or record["bounded"], record


@pytest.mark.parametrize("mutation", sorted(KILLS))
def test_the_gpu_tiers_kill(mutation: str, tmp_path: Path) -> None:
    tests, lines = KILLS[mutation]
    run = run_gate(list(tests), tmp_path, mutation, ["-p", "no:xdist"])
    assert run.returncode == 1, f"exit {run.returncode}: the mutant survived?\n{run.output[-4000:]}"
    assert any(line in run.output for line in lines), run.output[-4000:]
    survived = [t for t in tests if t not in run.failed_tests()]
    assert not survived, f"{mutation} survived {survived}; failed: {sorted(run.failed_tests())}"


def test_the_fp8_group_is_checked_once_a_build_honours_it(tmp_path: Path) -> None:
    """``fp8-group-ignored`` needs an executor that reduces within fp8_group (none yet: the strict
    xfails of ddp-fp8-group-per-rank); there, the per-rank-group test must pass clean and fail mutated."""
    from teparity.stack.envprobe import environment

    if reason := CATALOG["fp8-group-ignored"].unavailable_reason(environment()):
        pytest.skip(reason)
    test = f"{FP8_GROUP}[functional-per-rank]"
    assert run_gate([test], tmp_path, None, ["-p", "no:xdist"]).returncode == 0
    run = run_gate([test], tmp_path, "fp8-group-ignored", ["-p", "no:xdist"])
    assert test in run.failed_tests(), run.output[-4000:]


def test_a_rank_without_the_backward_sync_fails_fast_with_every_stack(tmp_path: Path, backend: str, world_size: int) -> None:
    """The last rank skips the backward FP8 all-reduce (``--teparity-world-size`` ranks, 2+): every rank
    is reported within the deadline, none hangs the session."""
    if world_size < 2:
        pytest.skip("a mismatched collective needs 2+ ranks (--teparity-world-size)")
    deadline = 90.0
    spec = PairSpec("legacy", "delayed", (Case(),), steps=2, strategy="thunder-ddp")
    start = time.monotonic()
    with pytest.raises(RanksFailed) as failed:
        run_ranks(legacy_ddp_with_sync_skipped_on_last_rank, spec, world_size=world_size, backend=backend,
                  timeout=deadline, pg_timeout=600, workdir=tmp_path)
    elapsed = time.monotonic() - start
    assert elapsed < deadline + STACK_DUMP_WAIT_S + 60, f"took {elapsed:.0f} s"
    by_rank = {f.rank: f for f in failed.value.failures}
    assert sorted(by_rank) == list(range(world_size)), str(failed.value)
    # Every stack is inside the run. Under gloo the collective blocks where it is issued, so the peers'
    # stacks name the sync; NCCL's is asynchronous and the host blocks at its next synchronisation.
    assert all("run_thunder" in f.detail for f in by_rank.values()), str(failed.value)
    if backend == "gloo":
        peers = [by_rank[rank].detail for rank in range(world_size - 1)]
        assert all("reduce_and_update_fp8_tensors" in d or "te_sync_fp8_meta_bwd" in d for d in peers), str(failed.value)
