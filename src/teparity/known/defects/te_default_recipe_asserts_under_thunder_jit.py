"""Known upstream defect ``te-default-recipe-asserts-under-thunder-jit``: a te.autocast without a recipe inside a
forward that thunder.jit traces raises from TE 2.15 on: thunder says it is compiling, and TE then refuses to build its
default recipe."""

from __future__ import annotations

from teparity import checks
from teparity.known import signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="te-default-recipe-asserts-under-thunder-jit",
    summary="a te.autocast(enabled=False) without a recipe inside a forward that thunder.jit traces raises "
    "AssertionError from TE 2.15 on: thunder answers torch.compiler.is_compiling() with True while it traces, and TE "
    "then refuses to build its default recipe",
    executors=("legacy", "functional"),
    signature=signatures.RECIPE_IN_COMPILED_REGION,
    checks=(checks.FP8_OFF_ENDS,),
    thunder=">=0.2.2",
    te=">=2.15",
    cause="transformer_engine/pytorch/quantization.py get_default_fp8_recipe asserts `not torch.compiler.is_compiling()` "
    "(TE commit 17aa2e4, first released in 2.15; te.autocast takes the default recipe where none is given, enabled or "
    "not), and thunder/core/jit_ext.py registers a lookaside for is_compiling that returns True. Passing a recipe to the "
    "inner te.autocast avoids it",
    seen=(
        "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows",
        "docs/results/h100-te2.20.2-te2.12.0-5c9f6f5",
    ),
)
