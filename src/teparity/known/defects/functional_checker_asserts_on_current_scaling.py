"""Known upstream defect ``functional-checker-asserts-on-current-scaling``: thunder's functional TE executor of
0.2.5.dev20250831 .. 0.2.6.dev20250928 raises AssertionError while checking a linear under Float8CurrentScaling or
Float8BlockScaling: every program with a linear fails to trace."""

from __future__ import annotations

from teparity.known import signatures
from teparity.known.defect import FixSeen, KnownDefect

ENTRY = KnownDefect(
    id="functional-checker-asserts-on-current-scaling",
    summary="thunder's functional TE executor of 0.2.5.dev20250831 .. 0.2.6.dev20250928 raises AssertionError while "
    "checking a linear under Float8CurrentScaling or Float8BlockScaling: every program with a linear fails to trace",
    executors=("functional",),
    signature=signatures.CHECKER_ASSERTS_THE_RECIPE,
    checks=("numerics[current]", "numerics[blockwise]"),
    thunder=">=0.2.5.dev20250831,<=0.2.6.dev20250928",
    te=">=2.2",
    cause="thunder/executors/transformer_engine_v2ex_impl.py (transformer_engineex_impl.py from 0.2.6.dev20250914) "
    "_linear_checker's check_valid_fp8_shapes: 'if fp8_recipe.delayed(): ...; assert fp8_recipe.mxfp8()', so any other "
    "recipe raises instead of declining. Read in the wheels 0.2.5.dev20250831 .. 0.2.6.dev20250928 (line 279); "
    "0.2.6.dev20251005 declines with a warning (functional-declines-current-scaling); before dev20250831 the legacy "
    "checker decides. Run on 0.2.5 with TE 2.20.2",
    seen=("docs/results/h200-matrix-cceeca7", "docs/results/h200-te2.9.0-13aaff2-combinations"),
    fixed=(FixSeen("thunder", "<=0.2.6.dev20250928", "docs/results/h200-te2.9.0-04f6fc3/02-th026pre.json.gz"),),
)
