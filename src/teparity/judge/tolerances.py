"""Comparison rules, each with its source: TE's own tables for activations and gradients, and the
FP8-state rule (exact where the math allows).

Activations and gradients: TransformerEngine tests/pytorch/distributed/run_numerics.py
``_get_tolerances`` (identical in v2.9 and v2.20, lines 193-212): Float8CurrentScaling rtol 0.4 atol
0.25; other FP8 recipes (DelayedScaling, MXFP8, block) rtol 0.125 atol 0.0625; unquantized bf16
1.6e-2 / 1e-5 and fp32 1e-3 / 1e-5.

FP8 scaling state, where every tensor TE sees is bitwise equal on both sides (linears only): amax
histories are copies of measured maxima and must match exactly; the legacy executor runs TE's own
modules and update, so its scales must be bitwise equal too.

The functional executor updates scales with TE's Python ``_amax_and_scale_update`` (``(fp8_max /
amax) / 2**margin``, ``torch.compile``d), never TE's fused kernel, so it is judged against eager TE on
that same path (``NVTE_UNFUSED_FP8_UPDATE=1`` on the eager side): then, linears only, outputs,
gradients and FP8 state are bitwise equal at every step (seen: 4 x H200, TE 2.9.0,
docs/results/h200-x4-te2.9.0-9c6aa69/unfused-fp8-update). Against eager TE's default
fused kernel its scales are 1 ulp off from the first update, and bf16 values on E4M3 rounding
midpoints flip from step 1 (docs/facts.md): that deviation is measured and reported, not judged.

With GELU between the linears, thunder computes GELU's backward with its own decomposition and eager
TE with torch's kernel: the gradients entering the earlier linears differ by rounding, and so do their
grad_output amaxes and scales (seen: 1 ulp, H200, TE 2.9.0, docs/results/h200-x2-te2.9.0-e392584-dev/any-tokens/);
those are compared within a few ulp, and outputs and gradients within TE's tables.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from teparity.stack.recipes import RECIPES

if TYPE_CHECKING:
    from teparity.records import Case, PairSpec


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



#: Unquantized fp32 on the CPU, thunder against torch (no TE): thunder's own GELU decomposition rounds
#: apart from torch's kernel (seen: 1.7e-6 at most, 2 gloo ranks, thunder 0.2.0.dev20240728, input not
#: requiring grad: docs/results/cpu-ddp-transform-2024/).
FP32_AGAINST_TORCH = Tolerance(1.3e-6, 1e-5, "torch.testing.assert_close's float32 default")


def for_recipe(recipe_id: str) -> Tolerance:
    return ACTIVATIONS_AND_GRADIENTS[RECIPES[recipe_id][0]]


EXACT = Tolerance(0.0, 0.0, "bitwise equal")
SAME_ARITHMETIC = Tolerance(
    0.0, 0.0, "bitwise: the functional executor and eager TE on TE's Python scale update do the same arithmetic"
)


def numerics_rule(recipe_id: str, executor: str, activation: str | None, apart: str | None = None) -> Tolerance:
    """Outputs and gradients: bitwise for the functional executor on linears only (against eager TE on
    its own update path), else TE's table for the recipe (``apart``: ``rounds_apart``'s reason)."""
    exact = executor == "functional" and activation is None and apart is None
    return SAME_ARITHMETIC if exact else for_recipe(recipe_id)


def rounds_apart(case: Case, spec: PairSpec) -> str | None:
    """Why the tensors TE sees differ between the sides beyond an activation's rounding, or None: the
    llama block's RMSNorm, rotary embedding, SDPA and SiLU are thunder's own decompositions against
    torch's kernels, and under ``torch.autocast`` thunder casts the fp32 input and weight to bf16 before
    TE quantizes them where eager TE quantizes the fp32 tensors. FP8 quantization then turns a rounding
    difference into up to one E4M3 step (2**-3 relative) in what the next linear sees."""
    reasons = []
    if case.model == "llama":
        reasons.append("the llama block's RMSNorm, rotary, SDPA and SiLU are thunder's decompositions against torch's kernels")
    if spec.torch_autocast:
        reasons.append(f"under torch.autocast thunder quantizes {spec.torch_autocast} copies of the input and weight, eager TE the fp32 tensors")
    return "; ".join(reasons) or None


#: FP8-state rule where ``rounds_apart``: within one E4M3 quantization step, relative (TE's table's rtol).
def _fp8_step(why: str) -> Tolerance:
    return Tolerance(0.125, 0.0, f"within one E4M3 step (rtol 0.125): {why}")


#: With an activation between linears: rounding of thunder's decomposed activation backward.
ROUNDING_ULPS = 4


def _ulps(count: int, why: str) -> Tolerance:
    return Tolerance(0.0, 0.0, f"{count} ulp: {why}", ulps=count)


def state_rules(executor: str, activation: str | None, apart: str | None = None) -> tuple[Tolerance, Tolerance]:
    """(amax_history rule, scale rule) for an executor and a model (see the module docstring; ``apart``:
    ``rounds_apart``'s reason)."""
    if apart is not None:
        return _fp8_step(apart), _fp8_step(apart)
    if activation is not None:
        rounding = _ulps(ROUNDING_ULPS, f"thunder's own {activation} backward rounds differently from torch's kernel")
        return rounding, rounding
    if executor == "legacy":
        return EXACT, Tolerance(0.0, 0.0, "legacy executor runs TE's modules and update: bitwise equal")
    return EXACT, SAME_ARITHMETIC
