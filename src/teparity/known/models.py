"""The eager models of the known defects' behaviours (``teparity.known.defect.DefectModel``): each says what thunder
does wrong as a change to the eager side, so that a covered test still compares every tensor against it."""

from __future__ import annotations

from teparity.known.defect import DefectModel
from teparity.records import (
    BF16_COPIES,
    FRESH_STATE_PER_RECIPE_OBJECT,
    RECOMPUTED_UNDER_FP8,
    RESUMED_WITHOUT_FP8_STATE,
    STATE_PER_CACHE_ENTRY,
    STATE_PER_CALL,
    STATE_REJOINS_UPDATE,
    TORCH_LINEARS,
)

TORCH_RUNS_EVERY_LINEAR = DefectModel(
    "every linear run by torch on the same parameters, no FP8 state; TE holds none", (("model", TORCH_LINEARS),),
    te_claims=False,
)
WORLD_REDUCTION = DefectModel("eager TE reducing amaxes over the world, not the fp8 group", (("fp8_group_size", None),))
NO_REDUCTION = DefectModel("eager TE with each rank its own fp8 group: no amax reduction across ranks", (("fp8_group_size", 1),))
STATE_PER_ENTRY = DefectModel(
    "eager TE with an FP8 state per thunder cache entry: per input shape and per whether the input requires grad, and for the micro-batches without the "
    "gradient all-reduce another than for the one with it (te.Linear twins sharing the parameters; for the functional "
    "executor, whose states are its traces' own, a twin's state moves only when it runs)",
    (("model", STATE_PER_CACHE_ENTRY),),
)
FRESH_STATE_PER_RECIPE = DefectModel(
    "eager TE starting a fresh FP8 state (a te.Linear twin sharing the parameters) whenever the recipe object changes, "
    "and a new recipe object each step (as TE's default recipe is a new object at every call outside an autocast)",
    (("model", FRESH_STATE_PER_RECIPE_OBJECT), ("new_recipe_each_step", True)),
)
FP8_ON_WHERE_OFF = DefectModel(
    "eager TE in FP8 where the caller turned it off (te.autocast(enabled=False) around a step, and the network's own "
    "disabled regions), its state updated as with FP8 on", (("fp8_where_off", "on"),),
)
FP8_IN_DISABLED_AUTOCAST = DefectModel(
    "eager TE in FP8 inside the caller's disabled autocast, whose exit updates no forward state (the backward's update "
    "runs), and the network's own disabled regions in FP8", (("fp8_where_off", "on-without-forward-update"),),
)
QUANTIZED_BF16_COPIES = DefectModel(
    "eager TE quantizing bfloat16 copies of the fp32 input and parameters, the copies' gradients sent to the fp32 ones",
    (("model", BF16_COPIES),),
)
RECOMPUTE_RECORDS_AMAXES = DefectModel(
    "eager TE with the linears thunder recomputes under torch.utils.checkpoint, recomputed in the backward under FP8 "
    "autocast with no forward update at its exit (thunder.jit's backward takes the region's last GELU's cdf and "
    "density at the forward's input; thunderfx recomputes all of it; before 0.2.5.dev20250706 both keep every region "
    "GELU's and recompute it as the recomputed input times the forward's cdf)", (("model", RECOMPUTED_UNDER_FP8),),
)
SAVED_NOT_RECOMPUTED = DefectModel(
    "eager TE without checkpointing (thunder saves the checkpointed TE linears' outputs): the numbers of the true "
    "reference, the recomputation invariant waived", (), waived=("recomputed-te-linears",),
)
INPUT_GRAD_STASHED = DefectModel(
    "eager TE whose linears, in a micro-batch without the gradient reduction, accumulate their input's gradient in "
    "place of their weight's, where the input requires grad", (("input_grad_as_weight_grad", True),),
)
FRESH_STATE_AT_RESUME = DefectModel(
    "eager TE resumed from its state_dict without TE's _extra_state: the resumed modules start a fresh FP8 state",
    (("model", RESUMED_WITHOUT_FP8_STATE),),
)
STATE_PER_LINEAR_CALL = DefectModel(
    "eager TE with the shared linear's second call through a te.Linear of its own on the same parameters: an FP8 "
    "state per call", (("model", STATE_PER_CALL),),
)
STATE_REJOINS_UPDATE_AFTER_TYPE_CHANGE = DefectModel(
    "eager TE whose delayed-scaling state, made anew when the recipe type changes back, joins TE's global amax update "
    "(as thunder's fresh state is updated)", (("model", STATE_REJOINS_UPDATE),),
)
