"""Known upstream defect ``functional-block-scaling-quantizer-count``: thunder's functional TE executor of 0.2.3 ..
0.2.5.dev20250824 asks a Float8BlockScaling recipe state for 2 forward quantizers, and TE asserts on the count:
every program with a linear fails."""

from __future__ import annotations

from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-block-scaling-quantizer-count",
    summary="thunder's functional TE executor of 0.2.3 .. 0.2.5.dev20250824 asks a Float8BlockScaling recipe state "
    "for 2 forward quantizers, and TE asserts on the count: every program with a linear fails",
    executors=("functional",),
    signature=signatures.BLOCK_SCALING_QUANTIZER_COUNT,
    checks=("numerics[blockwise]",),
    thunder=">=0.2.3,<0.2.5.dev20250831",
    te=">=2.9",
    cause="transformer_engine_v2ex_impl.py _te_linear_execution_transform calls get_te_fp8_state(recipe, 'forward', 2) "
    "(input and weight), and TE's Float8BlockScalingRecipeState.make_quantizers asserts num_quantizers % 3 == 0 (input, "
    "weight, output per GEMM: quantization.py). The checker of those builds (the legacy executor's) reads no recipe and "
    "accepts the linear. From 0.2.5.dev20250831 the functional checker asserts on the recipe first "
    "(functional-checker-asserts-on-current-scaling), from 0.2.6.dev20251005 it declines it "
    "(functional-declines-current-scaling)",
    seen=("docs/results/h200-te2.9.0-13aaff2-combinations",),
    fixed=(FixSeen("thunder", "<0.2.5.dev20250831", "docs/results/h100-matrix-a42f2cc/te-2.9.0/te2.9.0-th0.2.5.json.gz"),),
)
