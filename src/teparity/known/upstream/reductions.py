"""The known defects of the amax reduction across data-parallel ranks: both executors reduce over the world where
eager TE reduces over fp8_autocast's group, and the functional executor before 0.2.5.dev20250824 reduces over none."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import BisectedBound, KnownDefect
from teparity.known.runs import (
    CLEAN_RELEASES_RUN_TE29,
    FEATURES_RUN_TE29_82BFE86,
    FIX_BISECTS_TE29,
    MATRIX,
    MATRIX_RUN,
    RANGE_BISECTS_TE29,
    RELEASES_WEEKLIES_RUN_TE29,
    SEEN_TE29,
    STRATEGIES_RUN_TE29,
    VERSIONS_RUN_TE29,
)

LEGACY_FP8_GROUP_IGNORED = KnownDefect(
    id="legacy-fp8-group-ignored",
    summary="thunder's legacy TE executor wraps its forward in fp8_autocast without the caller's fp8_group: "
    "amaxes are reduced over the world",
    executors=("legacy",),
    signature=signatures.AUTOCAST_WITHOUT_GROUP,
    checks=checks.FP8_GROUPS,
    thunder=">=0.2.0.dev0,<0.2.7",
    te=">=1.6,<2.21",
    cause="thunder/executors/transformer_engine_v1ex.py TE_CTX_STR: fp8_autocast(fp8_recipe=...) with no fp8_group. Run "
    "with TE 2.9-2.20; TE 1.6-1.8 read, not run: the same TE_CTX_STR (transformer_engineex.py before 0.2.6) is in every "
    "build 0.2.0.dev20240609 .. 0.2.6",
    model=models.WORLD_REDUCTION,
    seen=(MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-x2-te2.9.0-e797194",
          "docs/results/h200-x4-te2.9.0-dcd92ab"),
)

FUNCTIONAL_FP8_GROUP_IGNORED = KnownDefect(
    id="functional-fp8-group-ignored",
    summary="thunder's functional TE executor all-reduces amax histories over the default process group, "
    "ignoring fp8_autocast's group",
    executors=("functional",),
    signature=signatures.UPDATE_WITHOUT_GROUP,
    checks=checks.FP8_GROUPS,
    thunder=">=0.2.5.dev20250824,<0.2.8",
    te=">=2.9,<2.21",
    cause="thunder/executors/transformer_engineex_impl.py _te_fp8_amax_and_scale_update_impl all-reduces state.amax_history "
    "over _get_default_group() (thunder PR #2404). GPU bisect, TE 2.9.0: 0.2.5.dev20250824 is the first build with it; "
    "before it amaxes were not reduced at all (functional-amax-not-reduced-across-ranks)",
    model=models.WORLD_REDUCTION,
    seen=(MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6",
          "docs/results/h200-x2-te2.9.0-e797194", "docs/results/h200-x4-te2.9.0-dcd92ab",
          CLEAN_RELEASES_RUN_TE29),
    bounds=(BisectedBound("thunder", ">=0.2.5.dev20250824", f"{RANGE_BISECTS_TE29}/group-from/bisect.json"),),
)

FUNCTIONAL_AMAX_NOT_REDUCED_ACROSS_RANKS = KnownDefect(
    id="functional-amax-not-reduced-across-ranks",
    summary="before thunder 0.2.5.dev20250824 the functional TE executor does not all-reduce amaxes across data-parallel "
    "ranks: each rank's FP8 scales follow its own data",
    executors=("functional",),
    signature=signatures.RANKS_PART_UNREDUCED,
    checks=(checks.DDP, checks.DDP_FIRST_STEP, checks.DDP_LLAMA, checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION,
            checks.FSDP, checks.FSDP_LLAMA, checks.FSDP_GRAD_ACCUMULATION, checks.DDP_THUNDERFX, checks.FSDP2_THUNDERFX,
            checks.FSDP_ACTIVATION_CHECKPOINTING),
    thunder=">=0.2.3,<=0.2.5.dev20250817",
    te=SEEN_TE29,
    cause="transformer_engine_v2ex_impl.py (0.2.3, 0.2.4) updates each recipe state from its own amax history, where eager "
    "TE reduces over the fp8_autocast group; thunder PR #2404 added the all-reduce (teparity's mutant "
    "functional-no-cross-rank-reduction removes it). Run on 0.2.3 .. 0.2.5.dev20250817 with TE 2.9.0; a GPU bisect finds "
    "0.2.5.dev20250824 clean, where functional-fp8-group-ignored starts. Every multi-rank FP8 check meets it: the ddp and "
    "fsdp tiers' on 0.2.3 and 0.2.4 with TE 2.9.0 (docs/results/h200-matrix-4a18837), torch DDP around thunderfx's too "
    "(docs/results/h200-te2.9.0-8cf5409-strategies)",
    model=models.NO_REDUCTION,
    seen=(VERSIONS_RUN_TE29, FEATURES_RUN_TE29_82BFE86, RELEASES_WEEKLIES_RUN_TE29,
          FIX_BISECTS_TE29, CLEAN_RELEASES_RUN_TE29, MATRIX, STRATEGIES_RUN_TE29),
    bounds=(BisectedBound("thunder", "<=0.2.5.dev20250817", f"{RANGE_BISECTS_TE29}/unreduced-fix/bisect.json"),),
)
