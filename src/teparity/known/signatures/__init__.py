"""The signatures of the known upstream defects: each a failure type of ``teparity.judge.failures`` (or
``RanksFailed``), a predicate over that failure's evidence, and the predicate in words. A predicate reads only
the evidence its failure type carries; ``harness/test_known_defects.py`` holds each against its defect's
own failure and against look-alikes that must not match.

A module a kind of failure, each its predicates first and its signatures after:

- ``numbers``: numbers parted from eager TE's (``PartedFromEager``, no case raised);
- ``raises``: a side, a rank or the run raised or died (``RaisedOnTheRanks``, ``RanksFailed``, ``ThunderRunRaised``,
  and ``PartedFromEager`` where thunder's side of the cases raised and no number differs);
- ``traces``: a trace invariant broken (``TraceInvariantBroken``) or the backward sync miscounted (``SyncCountWrong``);
- ``fallbacks``: torch ran the linears TE was to hold (``SilentFallback``);
- ``groups``: FP8 states reduced outside the fp8 group (``ReducedOutsideTheGroup``).

The entries name a signature from here (``signatures.NAME``): each module's signatures are re-exported below."""

from __future__ import annotations

from teparity.known.signatures.numbers import (
    BF16_COPIES_QUANTIZED,
    FP8_STATE_PER_CACHE_ENTRY,
    FP8_WHERE_OFF,
    PARTED_FROM_STEP_ZERO_OF_MICRO_BATCHES,
    RANKS_PART_UNREDUCED,
    RECOMPUTE_RECORDS_AMAX_AGAIN,
    STATE_PER_CALL,
    STATE_PER_INPUT_SHAPE,
    STATE_RESTARTS_AT_RESUME,
    STATE_RESTARTS_EACH_STEP,
    STATE_STRANDED_BY_TE,
)
from teparity.known.signatures.raises import (
    BLOCK_SCALING_QUANTIZER_COUNT,
    CHECKER_ASSERTS_THE_RECIPE,
    CHECKPOINTED_GELU_READS_AN_UNBOUND_INPUT,
    CHECKPOINT_NOT_TRACED,
    CUDA_GRAPH_BACKWARD_LAYOUT,
    FP32_BIAS_GEMM,
    FSDP_NO_SYNC_STASHED_NOTHING,
    FX_CODEGEN_NOT_INTERPRETED,
    FSDP_NO_SYNC_STASH_LOST_A_PRODUCER,
    LEGACY_UNPACK_AT_TE_LINEAR,
    NO_ALLREDUCE_BEHIND_INPUT_GRAD,
    NO_BUCKET_FOR_THE_INPUT_GRAD,
    RECIPE_IN_COMPILED_REGION,
    RECOMPUTE_READS_AN_UNBOUND_FORWARD_TENSOR,
    SDPA_PARAMS_OF_SIX,
    SYMBOLIC_VALUES_CANNOT_UNPACK,
    TE_MODULES_UNTRACEABLE,
    TORCHCOMPILE_CAT_SEGFAULT,
)
from teparity.known.signatures.traces import (
    CHECKPOINTED_LINEARS_NOT_RECOMPUTED,
    NO_BACKWARD_SYNC_AT_ALL,
    RECOMPUTE_UPDATES_THE_FORWARD_STATE_AGAIN,
)
from teparity.known.signatures.fallbacks import (
    CURRENT_SCALING_LEFT_TO_TORCH,
    LEGACY_CHECKER_LOST_TE,
    LEGACY_MODULE_LOST_TE,
    NO_GRAD_LEFT_TO_TORCH,
)
from teparity.known.signatures.groups import (
    AUTOCAST_WITHOUT_GROUP,
    UPDATE_WITHOUT_GROUP,
)

