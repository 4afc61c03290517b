"""The known defects of thunder's functional TE executor (``transformer_engineex_impl.py``;
``transformer_engine_v2ex_impl.py`` before 0.2.6.dev20250914): the legacy checker it borrowed, and lost TE with; an
fp32 bias in the FP8 GEMM; the recipes other than delayed scaling and MXFP8 (declined, asserted on, or asked for a
count of quantizers TE refuses)."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect
from teparity.known.runs import (
    COMBINATIONS_RUN_TE220,
    COMBINATIONS_RUN_TE29,
    FEATURES_RUN_TE29,
    MATRIX_RUN,
    MATRIX_TE220,
    TE220_OLDER_BUILDS_RUN,
    TE220_THUNDER025_RUN,
    VERSIONS_RUN_TE29,
)

FUNCTIONAL_EXECUTOR_LOSES_TE_FROM_TE_2_10 = KnownDefect(
    id="functional-executor-loses-te-from-te-2.10",
    summary="the functional TE executor of thunder 0.2.3 .. 0.2.5.dev20250824 claims no linear with TE 2.10+: it "
    "asks the legacy executor's checker, which declines every linear there",
    executors=("functional",),
    signature=signatures.LEGACY_CHECKER_LOST_TE,
    checks=checks.TE_RUNS,
    thunder=">=0.2.3,<=0.2.5.dev20250824",
    te=">=2.10",
    cause="thunder/executors/transformer_engine_v2ex_impl.py imports _linear_checker from the legacy "
    "transformer_engineex.py, which returns False unless its TE_AVAILABLE, lost with TE 2.10+ "
    "(legacy-executor-loses-te-from-te-2.10). Read in every build 0.2.3 .. 0.2.5.dev20250824, gone from 0.2.5.dev20250831 "
    "(docs/results/wheels-functional-borrows-legacy-checker). Run with TE 2.20.2 on 0.2.3, 0.2.4, 0.2.5.dev20250803; 0.2.5 "
    "and 0.2.6.dev20251019 claimed every linear",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=(TE220_OLDER_BUILDS_RUN, TE220_THUNDER025_RUN),
)

FUNCTIONAL_FP32_BIAS_IN_FP8_GEMM = KnownDefect(
    id="functional-fp32-bias-in-fp8-gemm",
    summary="thunder's functional TE executor passes an fp32 bias into TE's FP8 GEMM, which cuBLASLt rejects",
    executors=("functional",),
    signature=signatures.FP32_BIAS_GEMM,
    checks=(checks.NUMERICS_FP32_BIAS,),
    thunder=">=0.2.3,<0.2.8",
    te=">=2.9,<2.21",
    cause="thunder/executors/transformer_engineex_impl.py _linear_fwd_impl calls BasicLinear._functional_forward(bias=bias, "
    "with_quantized_compute=True) with the fp32 bias, which general_gemm fuses into the FP8 GEMM; cuBLASLt has no such "
    "GEMM. Eager te.Linear casts the bias to bf16 for FP8 GEMMs (module/linear.py _Linear.forward); te.ops does not fuse an "
    "fp32 bias",
    seen=(MATRIX_RUN, "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-te2.9.0-89202c6",
          "docs/results/h200-te2.12.0-89202c6", FEATURES_RUN_TE29, VERSIONS_RUN_TE29),
)

FUNCTIONAL_DECLINES_CURRENT_SCALING = KnownDefect(
    id="functional-declines-current-scaling",
    summary="thunder's functional TE executor declines every linear under Float8CurrentScaling and "
    "Float8BlockScaling (with a warning): thunder runs them in torch where eager TE runs them in FP8",
    executors=("functional",),
    signature=signatures.CURRENT_SCALING_LEFT_TO_TORCH,
    checks=("numerics[current]", "numerics[blockwise]"),
    thunder=">=0.2.6.dev20251005,<0.2.8",
    te=">=2.2,<2.21",
    cause="thunder/executors/transformer_engineex_impl.py _linear_checker accepts DelayedScaling, MXFP8BlockScaling and "
    "NVFP4BlockScaling only; for another recipe it warns '... TE wont be used' and returns False, so torch takes the "
    "linear. Read in the wheels: the warning from 0.2.6.dev20251005 on; up to dev20250928 the checker asserts instead "
    "(functional-checker-asserts-on-current-scaling)",
    model=models.TORCH_RUNS_EVERY_LINEAR,
    seen=("docs/results/h200-te2.9.0-72fa083", "docs/results/h200-te2.20.2-72fa083", "docs/results/h200-te2.20.2-0901221", COMBINATIONS_RUN_TE220),
)

FUNCTIONAL_CHECKER_ASSERTS_ON_CURRENT_SCALING = KnownDefect(
    id="functional-checker-asserts-on-current-scaling",
    summary="thunder's functional TE executor of 0.2.5.dev20250831 .. 0.2.6.dev20250928 raises AssertionError while "
    "checking a linear under Float8CurrentScaling or Float8BlockScaling: every program with a linear fails to trace",
    executors=("functional",),
    signature=signatures.CHECKER_ASSERTS_THE_RECIPE,
    checks=("numerics[current]", "numerics[blockwise]"),
    thunder=">=0.2.5.dev20250831,<=0.2.6.dev20250928",
    te=">=2.2,<2.21",
    cause="thunder/executors/transformer_engine_v2ex_impl.py (transformer_engineex_impl.py from 0.2.6.dev20250914) "
    "_linear_checker's check_valid_fp8_shapes: 'if fp8_recipe.delayed(): ...; assert fp8_recipe.mxfp8()', so any other "
    "recipe raises instead of declining. Read in the wheels 0.2.5.dev20250831 .. 0.2.6.dev20250928 (line 279); "
    "0.2.6.dev20251005 declines with a warning (functional-declines-current-scaling); before dev20250831 the legacy "
    "checker decides. Run on 0.2.5 with TE 2.20.2",
    seen=(MATRIX_TE220, COMBINATIONS_RUN_TE29),
)

FUNCTIONAL_BLOCK_SCALING_QUANTIZER_COUNT = KnownDefect(
    id="functional-block-scaling-quantizer-count",
    summary="thunder's functional TE executor of 0.2.3 .. 0.2.5.dev20250824 asks a Float8BlockScaling recipe state "
    "for 2 forward quantizers, and TE asserts on the count: every program with a linear fails",
    executors=("functional",),
    signature=signatures.BLOCK_SCALING_QUANTIZER_COUNT,
    checks=("numerics[blockwise]",),
    thunder=">=0.2.3,<0.2.5.dev20250831",
    te=">=2.9,<2.21",
    cause="transformer_engine_v2ex_impl.py _te_linear_execution_transform calls get_te_fp8_state(recipe, 'forward', 2) "
    "(input and weight), and TE's Float8BlockScalingRecipeState.make_quantizers asserts num_quantizers % 3 == 0 (input, "
    "weight, output per GEMM: quantization.py). The checker of those builds (the legacy executor's) reads no recipe and "
    "accepts the linear. From 0.2.5.dev20250831 the functional checker asserts on the recipe first "
    "(functional-checker-asserts-on-current-scaling), from 0.2.6.dev20251005 it declines it "
    "(functional-declines-current-scaling)",
    seen=(COMBINATIONS_RUN_TE29,),
)
