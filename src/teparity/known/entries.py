"""The known upstream defects, as data: each entry's checks and executors, thunder and TE ranges, signature
(``teparity.known.signatures``), upstream cause and the committed runs that showed it.

``REGISTRY`` names every entry, in the order that docs/known-defects.md lists them and the registry's lookups try
them; an entry itself is defined in ``teparity.known.upstream``, in the module of what it concerns."""

from __future__ import annotations

from teparity.known.defect import KnownDefect
from teparity.known.upstream import checkpointing, distributed, fp8_state, functional, legacy, reductions, tracing

REGISTRY: tuple[KnownDefect, ...] = (
    legacy.LEGACY_EXECUTOR_LOSES_TE_FROM_TE_2_10,
    functional.FUNCTIONAL_EXECUTOR_LOSES_TE_FROM_TE_2_10,
    fp8_state.GRAD_ACCUMULATION_FP8_STATE_PER_CACHE_ENTRY,
    distributed.FSDP_NO_SYNC_LOSES_ACCUMULATED_GRADIENTS,
    distributed.FSDP_NO_SYNC_STASH_BREAKS_ON_FUSED_LINEAR_BACKWARD,
    distributed.FSDP_NO_SYNC_STASHES_INPUT_GRAD_AS_WEIGHT_GRAD,
    functional.FUNCTIONAL_FP32_BIAS_IN_FP8_GEMM,
    reductions.LEGACY_FP8_GROUP_IGNORED,
    reductions.FUNCTIONAL_FP8_GROUP_IGNORED,
    distributed.DDP_TRANSFORM_REJECTS_INPUT_GRAD,
    legacy.LEGACY_EXECUTOR_MISCOUNTS_TE_2_9_SAVED_TENSORS,
    distributed.FSDP_TRANSFORM_LAYER_BUCKETING_REJECTS_INPUT_GRAD,
    legacy.LEGACY_BACKWARD_SYNC_DROPPED_BY_DELAYED_SPLIT,
    tracing.NO_GRAD_FORWARD_LEFT_TO_TORCH,
    functional.FUNCTIONAL_DECLINES_CURRENT_SCALING,
    functional.FUNCTIONAL_CHECKER_ASSERTS_ON_CURRENT_SCALING,
    fp8_state.CHECKPOINT_DROPS_FP8_STATE,
    fp8_state.FP8_STATE_PER_INPUT_SHAPE,
    fp8_state.FP8_STATE_PER_LINEAR_CALL,
    functional.FUNCTIONAL_BLOCK_SCALING_QUANTIZER_COUNT,
    tracing.SYMBOLIC_VALUES_CANNOT_UNPACK_MODULE_PARAMETERS,
    fp8_state.FUNCTIONAL_NEW_RECIPE_OBJECT_RESETS_FP8_STATE,
    tracing.AUTOCAST_QUANTIZES_BF16_COPIES,
    checkpointing.LEGACY_CHECKPOINTING_RECORDS_AMAX_TWICE,
    reductions.FUNCTIONAL_AMAX_NOT_REDUCED_ACROSS_RANKS,
    checkpointing.FUNCTIONAL_CHECKPOINTING_SAVES_TE_LINEARS,
    checkpointing.FUNCTIONAL_THUNDERFX_CHECKPOINTING_BACKWARD_UNBOUND,
    checkpointing.FUNCTIONAL_JIT_CHECKPOINTING_BACKWARD_UNBOUND,
    checkpointing.FUNCTIONAL_CHECKPOINTING_UPDATES_FP8_STATE_TWICE,
    tracing.THUNDER_SDPA_PARAMS_PREDATE_TORCH_2_5,
    tracing.THUNDERFX_CANNOT_INTERPRET_TORCH_2_12_FX_CODEGEN,
    tracing.THUNDER_TORCHCOMPILE_CAT_SEGFAULT_ON_LLAMA,
    checkpointing.THUNDER_JIT_CANNOT_TRACE_CHECKPOINT_BEFORE_2025,
)
