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

Tightened from evidence. TE's tables are loose for what the gate compares: on one process or two ranks, every
committed passing GPU run of the checks judged by them showed differences three orders of magnitude below them. The
rule: where a table's tolerance had over 100x headroom on every committed passing run, the gate allows
``HEADROOM`` (16) times the largest difference any committed passing GPU run showed for that class of comparison,
rounded up to a power of two (``harness/test_tolerances.py`` recomputes the largest differences from the
reports under docs/results/ and holds every tightened rule to it):

- outputs and gradients, one process or two ranks, TE's DelayedScaling table: largest seen 4.58e-5 (legacy,
  GELU between the linears); llama block 1.22e-4 (thunder's RMSNorm, rotary, SDPA and SiLU): atol 2**-10 and
  2**-9, rtol 0.
- FP8 state of the llama block (where the sides round apart): largest seen 7 ulp (amax history), 4 ulp (scale):
  128 ulp, where TE's table allowed one E4M3 step (rtol 0.125).

Against a defect's model that runs every linear in torch (thunder lost TE), torch is compared with torch: TE's
unquantized tables, except the fp32 llama block, whose decompositions part from torch's kernels by up to 1.64e-3 over
two steps of four micro-batches (the declared matrix's TE 2.20.2 stacks): atol 2**-5, by the same recipe.

The fsdp tier is held to the same rules: its committed runs (2 gloo ranks, both executors, TE 2.9.0 and 2.20.2) showed
outputs and gradients bitwise equal to the reference. Its llama block's FP8 state is not part of the evidence: up to
teparity d957f83 the snapshot named the states of thunder's FSDP trace in trace order, where thunder runs ``wk``
before ``wq``, and so compared each state with another linear's (docs/facts.md).

With three or more ranks the gradient all-reduce sums in another order on each side (up to 0.0625 at step 0,
docs/facts.md): TE's table stays there.
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

    def words(self) -> str:
        """The rule in a few words, for the parity report."""
        if self.ulps is not None:
            return f"{self.ulps} ulp"
        return "bitwise" if self.rtol == self.atol == 0 else f"rtol {self.rtol:.3g} atol {self.atol:.3g}"


_RUN_NUMERICS = "TE tests/pytorch/distributed/run_numerics.py _get_tolerances (v2.9 = v2.20, l.193-212)"

ACTIVATIONS_AND_GRADIENTS: dict[str, Tolerance] = {
    "DelayedScaling": Tolerance(0.125, 0.0625, _RUN_NUMERICS + ": fp8"),
    "Float8CurrentScaling": Tolerance(0.4, 0.25, _RUN_NUMERICS + ": fp8_cs"),
    "Float8BlockScaling": Tolerance(0.125, 0.0625, _RUN_NUMERICS + ": fp8 (block scaling)"),
}


#: Unquantized fp32 on the CPU, thunder against torch (no TE): thunder's own GELU decomposition rounds
#: apart from torch's kernel (seen: 1.7e-6 at most, 2 gloo ranks, thunder 0.2.0.dev20240728, input not
#: requiring grad: docs/results/cpu-ddp-transform-2024/).
FP32_AGAINST_TORCH = Tolerance(1.3e-6, 1e-5, "torch.testing.assert_close's float32 default")


def for_recipe(recipe_id: str) -> Tolerance:
    return ACTIVATIONS_AND_GRADIENTS[RECIPES[recipe_id][0]]


#: The multiple of the largest difference seen that a tightened rule allows (module docstring).
HEADROOM = 16
#: Tightened rules (module docstring): outputs and gradients on one process or two ranks, where TE's table applied.
TIGHT_ACTIVATION_ROUNDING = Tolerance(0.0, 2**-10, "16 x the largest seen (4.58e-5), as a power of two: linears with an "
                                      "activation, or the legacy executor, on 1-2 ranks")
TIGHT_LLAMA = Tolerance(0.0, 2**-9, "16 x the largest seen (1.22e-4), as a power of two: the llama block on 1-2 ranks")
#: FP8 state of the llama block: 16 x the largest ulp distance seen (7), as a power of two.
LLAMA_STATE_ULPS = 128
#: Where the reference is a defect's model that runs every linear in torch: TE's table for unquantized tensors.
UNQUANTIZED = {
    "bfloat16": Tolerance(1.6e-2, 1e-5, _RUN_NUMERICS + ": bf16"),
    "float32": Tolerance(1e-3, 1e-5, _RUN_NUMERICS + ": fp32"),
}
#: The largest output or gradient difference seen between thunder's fp32 llama block with every linear in torch and
#: eager torch's, over the declared matrix's TE 2.20.2 stacks (ddp-llama-grad-accumulation on thunder 0.2.4 and 0.2.5,
#: 2 steps x 4 micro-batches: docs/results/h200-matrix-cceeca7): thunder's own RMSNorm, rotary, SDPA and SiLU round
#: apart from torch's kernels, and nothing quantizes the difference away.
LLAMA_UNQUANTIZED_SEEN = 1.64e-3
#: ``HEADROOM`` times the largest seen, as a power of two (the tightened rules' recipe).
LLAMA_UNQUANTIZED = Tolerance(0.0, 2**-5, "16 x the largest seen (1.64e-3), as a power of two: the llama block's "
                              "RMSNorm, rotary, SDPA and SiLU are thunder's decompositions, the linears torch's on both sides")
#: The largest world whose comparison is tightened (3+ ranks sum their gradients in another order).
TIGHT_RANKS = 2

EXACT = Tolerance(0.0, 0.0, "bitwise equal")
SAME_ARITHMETIC = Tolerance(
    0.0, 0.0, "bitwise: the functional executor and eager TE on TE's Python scale update do the same arithmetic"
)


def tightened(ranks: int) -> bool:
    """Whether a comparison is one the evidence tightened: 1-2 ranks."""
    return ranks <= TIGHT_RANKS


def numerics_rule(recipe_id: str, executor: str, activation: str | None, apart: str | None = None, *,
                  tight: bool = False, decomposed: bool = False) -> Tolerance:
    """Outputs and gradients: bitwise for the functional executor on linears only (against eager TE on
    its own update path), else TE's table for the recipe (``apart``: ``rounds_apart``'s reason), tightened where
    ``tight`` (``tightened``) for DelayedScaling (module docstring)."""
    exact = executor == "functional" and activation is None and apart is None
    if exact:
        return SAME_ARITHMETIC
    table = for_recipe(recipe_id)
    if not tight or RECIPES[recipe_id][0] != "DelayedScaling" or (apart is not None and not decomposed):
        return table
    return TIGHT_LLAMA if decomposed else TIGHT_ACTIVATION_ROUNDING


def unquantized_rule(dtype: str, *, decomposed: bool = False) -> Tolerance:
    """Outputs and gradients against a defect's model that runs every linear in torch: TE's table for the dtype; for an
    architecture with decompositions (``decomposed``: the llama block's) in fp32, which round apart from torch's
    kernels, ``LLAMA_UNQUANTIZED``."""
    return LLAMA_UNQUANTIZED if decomposed and dtype == "float32" else UNQUANTIZED[dtype]


def rounds_apart(case: Case, spec: PairSpec) -> str | None:
    """Why the tensors TE sees differ between the sides beyond an activation's rounding, or None: the
    llama block's RMSNorm, rotary embedding, SDPA and SiLU are thunder's own decompositions against
    torch's kernels, and under ``torch.autocast`` thunder casts the fp32 input and weight to bf16 before
    TE quantizes them where eager TE quantizes the fp32 tensors. FP8 quantization then turns a rounding
    difference into up to one E4M3 step (2**-3 relative) in what the next linear sees."""
    from teparity.records import BF16_COPIES

    reasons = []
    if case.arch.decompositions:
        reasons.append(case.arch.decompositions)
    if spec.torch_autocast and spec.model != BF16_COPIES:  # the model quantizes the same bf16 copies as thunder
        reasons.append(f"under torch.autocast thunder quantizes {spec.torch_autocast} copies of the input and weight, eager TE the fp32 tensors")
    return "; ".join(reasons) or None


#: FP8-state rule where ``rounds_apart``: within one E4M3 quantization step, relative (TE's table's rtol).
def _fp8_step(why: str) -> Tolerance:
    return Tolerance(0.125, 0.0, f"within one E4M3 step (rtol 0.125): {why}")


#: With an activation between linears: rounding of thunder's decomposed activation backward.
ROUNDING_ULPS = 4


def _ulps(count: int, why: str) -> Tolerance:
    return Tolerance(0.0, 0.0, f"{count} ulp: {why}", ulps=count)


def state_rules(executor: str, activation: str | None, apart: str | None = None, *, tight: bool = False,
                decomposed: bool = False) -> tuple[Tolerance, Tolerance]:
    """(amax_history rule, scale rule) for an executor and a model (see the module docstring; ``apart``:
    ``rounds_apart``'s reason; an architecture's decompositions, ``decomposed``, alone are tightened, where ``tight``)."""
    if apart is not None and decomposed and tight:
        rule = _ulps(LLAMA_STATE_ULPS, f"16 x the largest seen (7 ulp), as a power of two: {apart}")
        return rule, rule
    if apart is not None:
        return _fp8_step(apart), _fp8_step(apart)
    if activation is not None:
        rounding = _ulps(ROUNDING_ULPS, f"thunder's own {activation} backward rounds differently from torch's kernel")
        return rounding, rounding
    if executor == "legacy":
        return EXACT, Tolerance(0.0, 0.0, "legacy executor runs TE's modules and update: bitwise equal")
    return EXACT, SAME_ARITHMETIC
