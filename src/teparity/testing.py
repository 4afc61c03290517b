"""What a tier test needs, from one module (as ``torch.testing`` is for torch's tests): the checks and the reasons a
test skips, the parity pair and its spec (``Pairs``: ``run`` a spec on the ranks, then ``judge_against_te_or_model``:
against eager TE and, where a known defect with a model covers the test, against that model), the scenarios of the
trace tier, and the judges' comparisons, failures and invariants."""

from __future__ import annotations

from teparity import checks
from teparity.gate.pairs import Pairs
from teparity.gate.ranks import RankRunner, StrategyRanks
from teparity.gate.references import reference
from teparity.inrank.fsdp_transform import FsdpTransformSpec, fsdp_transform_run
from teparity.inrank.inference8bit import QUANTIZED_LINEAR, Inference8BitSpec, inference8bit_run
from teparity.inrank.scenarios import DdpTransformSpec, LegacySyncRun, LegacySyncSpec, ddp_transform_run, legacy_sync_run
from teparity.inrank.sides import run_thunder
from teparity.inrank.te_modules import COMPILE_PATHS, TE_MODULE_NETWORKS, TeModulesSpec, te_modules_run
from teparity.inrank.thunderfx_transform import ThunderfxSpec, thunderfx_run
from teparity.judge.compare import Comparison, compare_across_ranks, compare_ddp_runs, state_is_empty
from teparity.judge.failures import ReducedOutsideTheGroup, SilentFallback, SyncCountWrong, ThunderRunRaised, raise_if_ranks_raised
from teparity.judge.fsdp_order import order_differences, placement
from teparity.judge.parity import (
    assert_te_as_the_reference,
    assert_te_claimed,
    compare_sides,
    compiled_entries,
    fused_update_deviation,
    left_out,
    raise_if_thunder_raised,
    steps_compared_with_eager,
    sync_counts,
    trace_violations,
)
from teparity.judge.tolerances import FP32_AGAINST_TORCH
from teparity.judge.traces import assert_no_violations, check_backward_sync, check_no_forward_sync
from teparity.records import Case, DdpTransformRun, Pair, PairSpec, fp8_groups
from teparity.stack import reasons, recipes
from teparity.strategies import REFERENCES

__all__ = [
    "FP32_AGAINST_TORCH", "QUANTIZED_LINEAR", "Case", "Comparison", "DdpTransformRun", "DdpTransformSpec", "FsdpTransformSpec",
    "COMPILE_PATHS", "Inference8BitSpec", "LegacySyncRun", "TE_MODULE_NETWORKS", "TeModulesSpec", "ThunderRunRaised",
    "inference8bit_run", "te_modules_run",
    "LegacySyncSpec", "Pair", "PairSpec", "Pairs", "REFERENCES", "RankRunner", "ReducedOutsideTheGroup", "SilentFallback", "StrategyRanks", "SyncCountWrong", "ThunderfxSpec",
    "assert_no_violations", "assert_te_as_the_reference", "assert_te_claimed", "check_backward_sync", "check_no_forward_sync",
    "checks", "compare_across_ranks", "compare_ddp_runs", "compare_sides", "compiled_entries", "ddp_transform_run",
    "fp8_groups", "fsdp_transform_run", "fused_update_deviation", "left_out", "legacy_sync_run", "order_differences",
    "placement", "raise_if_ranks_raised", "raise_if_thunder_raised", "reasons", "recipes", "reference", "run_thunder",
    "state_is_empty", "steps_compared_with_eager", "sync_counts", "thunderfx_run", "trace_violations",
]
