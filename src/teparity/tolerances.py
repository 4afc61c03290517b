"""Comparison rules, each with its source: TE's own tables for activations and gradients, and the
FP8-state rule (exact where the math allows).

Activations and gradients: TransformerEngine tests/pytorch/distributed/run_numerics.py
``_get_tolerances`` (identical in v2.9 and v2.20, lines 193-212): Float8CurrentScaling rtol 0.4 atol
0.25; other FP8 recipes (DelayedScaling, MXFP8, block) rtol 0.125 atol 0.0625; unquantized bf16
1.6e-2 / 1e-5 and fp32 1e-3 / 1e-5.

FP8 scaling state, where every tensor TE sees is bitwise equal on both sides (linears only): amax
histories are copies of measured maxima and must match exactly; the legacy executor runs TE's own
modules and update, so its scales must be bitwise equal too; the functional executor updates scales
with TE's Python ``_amax_and_scale_update`` (``(fp8_max / amax) / 2**margin`` in torch ops) instead of
TE's fused CUDA kernel (and under ``torch.compile``), so a scale may differ by an ulp. Measured: at most 1 ulp after the first step
(amax histories, outputs and gradients bitwise equal; 2 x H200, TE 2.9.0, thunder 0.2.6, ddp-first-step,
docs/results/h200-x2-te2.9.0-thunder0.2.6/; the same on TE 2.12.0, 2.16.1, 2.20.2). Later steps cannot
measure it: from the second step the functional executor's outputs already differ (a finding: bf16 values
on E4M3 rounding midpoints that a 1-ulp scale flips; bitwise with NVTE_UNFUSED_FP8_UPDATE=1, docs/facts.md). With GELU between the linears, thunder computes GELU's backward
with its own decomposition and eager TE with torch's kernel: the gradients entering the earlier
linears differ by rounding, and so do their grad_output amaxes and scales (seen: 1 ulp, H200, TE
2.9.0, docs/results/h200-x2-te2.9.0-dev-runs/); those are compared within a few ulp.
"""

from __future__ import annotations

import dataclasses

from teparity.recipes import RECIPES


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    source: str
    #: FP8-state rules: at most this many float32 ulps apart, entry by entry (rtol and atol then 0).
    ulps: int | None = None


_RUN_NUMERICS = "TE tests/pytorch/distributed/run_numerics.py _get_tolerances (v2.9 = v2.20, l.193-212)"

ACTIVATIONS_AND_GRADIENTS: dict[str, Tolerance] = {
    "DelayedScaling": Tolerance(0.125, 0.0625, _RUN_NUMERICS + ": fp8"),
    "Float8CurrentScaling": Tolerance(0.4, 0.25, _RUN_NUMERICS + ": fp8_cs"),
}

#: Functional-executor scales: at most this many float32 ulps from eager TE (measured; module docstring).
FUNCTIONAL_SCALE_ULPS = 1


def for_recipe(recipe_id: str) -> Tolerance:
    return ACTIVATIONS_AND_GRADIENTS[RECIPES[recipe_id][0]]


EXACT = Tolerance(0.0, 0.0, "bitwise equal")
#: With an activation between linears: rounding of thunder's decomposed activation backward.
ROUNDING_ULPS = 4


def _ulps(count: int, why: str) -> Tolerance:
    return Tolerance(0.0, 0.0, f"{count} ulp: {why}", ulps=count)


def state_rules(executor: str, activation: str | None) -> tuple[Tolerance, Tolerance]:
    """(amax_history rule, scale rule) for an executor and a model (see the module docstring)."""
    if activation is not None:
        rounding = _ulps(ROUNDING_ULPS, f"thunder's own {activation} backward rounds differently from torch's kernel")
        return rounding, rounding
    if executor == "legacy":
        return EXACT, Tolerance(0.0, 0.0, "legacy executor runs TE's modules and update: bitwise equal")
    return EXACT, _ulps(FUNCTIONAL_SCALE_ULPS, "functional executor updates scales with TE's Python path, not the fused kernel")
