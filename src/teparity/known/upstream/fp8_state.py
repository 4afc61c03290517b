"""The known defects of where thunder keeps TE's FP8 state: a state per cache entry (the no-sync micro-batches',
an input shape's), per call of a linear and per recipe object, and none in the state_dict a run resumes from."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect
from teparity.known.runs import COMBINATIONS_RUN_TE220, COMBINATIONS_RUN_TE29, FEATURES_RUN, MATRIX_RUN

GRAD_ACCUMULATION_FP8_STATE_PER_CACHE_ENTRY = KnownDefect(
    id="grad-accumulation-fp8-state-per-cache-entry",
    summary="under skip_data_parallel_grad_sync each thunder cache entry keeps its own TE FP8 state, "
    "so the synced micro-batch does not see the amaxes of the ones before it",
    executors=("legacy", "functional"),
    signature=signatures.FP8_STATE_PER_CACHE_ENTRY,
    checks=(checks.DDP_GRAD_ACCUMULATION, checks.DDP_LLAMA_GRAD_ACCUMULATION, checks.FSDP_GRAD_ACCUMULATION),
    thunder=">=0.2.0.dev20240609,<0.2.8",
    te=">=1.6,<2.21",
    cause="thunder/__init__.py keys the cache on get_skip_data_parallel_grad_sync() (cache_info['no_grad_sync']), so the "
    "no-sync micro-batch gets its own cache entry and TE state (legacy: new TELinears, transformer_engine_v1ex.py; "
    "functional: new get_te_fp8_state states, transformer_engineex_impl.py); eager TE's micro-batches share one fp8_meta. "
    "Run on 0.2.6 and 0.2.7 dev builds with TE 2.9-2.20; read, not run, from 0.2.0.dev20240609 (TE 1.6+) on",
    model=models.STATE_PER_ENTRY,
    seen=(MATRIX_RUN, "docs/results/h200-te2.9.0-89202c6", "docs/results/h200-te2.12.0-89202c6"),
)

CHECKPOINT_DROPS_FP8_STATE = KnownDefect(
    id="checkpoint-drops-fp8-state",
    summary="thunder's state_dict holds no TE FP8 state: a run resumed from it (compiled again, or in eager TE) "
    "starts a fresh one, where eager TE resumes its own from _extra_state",
    executors=("legacy", "functional"),
    signature=signatures.STATE_RESTARTS_AT_RESUME,
    checks=(checks.CHECKPOINT_RESUME,),
    thunder=">=0.2.0.dev20240728,<0.2.8",
    te=">=1.6,<2.21",
    cause="thunder/core/module.py ThunderModule.state_dict returns the original module's parameters and buffers (and "
    "ThunderModule's own extra state, which it has none of); the TE FP8 state lives in the compiled traces (legacy: "
    "the TELinear modules of transformer_engine_v1ex.py; functional: get_te_fp8_state's TERecipeState, "
    "transformer_engineex_impl.py), so nothing saves it, and a new compilation starts its own. Eager te.Linear saves "
    "it as _extra_state (module/base.py get_extra_state). thunder issue #2622 asks for it",
    model=models.FRESH_STATE_AT_RESUME,
    seen=(COMBINATIONS_RUN_TE29,),
)

FP8_STATE_PER_INPUT_SHAPE = KnownDefect(
    id="fp8-state-per-input-shape",
    summary="thunder compiles a cache entry per input shape, each with its own TE FP8 state: a step of a new shape "
    "starts a fresh one, where eager TE keeps one state per module",
    executors=("legacy", "functional"),
    signature=signatures.STATE_PER_INPUT_SHAPE,
    checks=("new-input-shape[sequence-length-default]", "new-input-shape[short-last-batch-default]"),
    thunder=">=0.2.0.dev20240728,<0.2.8",
    te=">=1.6,<2.21",
    cause="thunder's default cache (CACHE_OPTIONS.CONSTANT_VALUES) keys an entry on the input's shape; each entry's "
    "execution trace has its own TE state (legacy: new TELinears, transformer_engine_v1ex.py; functional: new "
    "get_te_fp8_state states, a stateful operator per bound symbol, transformer_engineex_impl.py); eager te.Linear "
    "keeps one fp8_meta whatever the shape. The defect of grad-accumulation-fp8-state-per-cache-entry, with the "
    "shape as the key",
    model=models.STATE_PER_ENTRY,
    seen=(COMBINATIONS_RUN_TE29, COMBINATIONS_RUN_TE220),
)

FP8_STATE_PER_LINEAR_CALL = KnownDefect(
    id="fp8-state-per-linear-call",
    summary="thunder's TE executors keep an FP8 state per call of a linear: a linear called twice in a forward has "
    "two, where eager TE's module keeps one for both calls",
    executors=("legacy", "functional"),
    signature=signatures.STATE_PER_CALL,
    checks=(checks.LINEAR_CALLED_TWICE,),
    thunder=">=0.2.0.dev20240728,<0.2.8",
    te=">=1.6,<2.21",
    cause="each linear of the trace is a TE linear of its own with its own state (legacy: a TELinear per te_linear_N "
    "symbol, transformer_engine_v1ex.py; functional: get_te_fp8_state is a stateful operator, a TERecipeState per "
    "bound symbol, extend/__init__.py register_stateful_operator); eager te.Linear records both calls' amaxes in "
    "its one fp8_meta",
    model=models.STATE_PER_LINEAR_CALL,
    seen=(COMBINATIONS_RUN_TE29, COMBINATIONS_RUN_TE220),
)

FUNCTIONAL_NEW_RECIPE_OBJECT_RESETS_FP8_STATE = KnownDefect(
    id="functional-new-recipe-object-resets-fp8-state",
    summary="thunder's functional TE executor starts a new FP8 state whenever the recipe object changes, where "
    "eager TE keeps each module's state across DelayedScaling recipes",
    executors=("functional",),
    signature=signatures.STATE_RESTARTS_EACH_STEP,
    checks=(checks.RECIPE_CHANGE,),
    thunder=">=0.2.3,<0.2.8",
    te=">=2.9,<2.21",
    cause="thunder/executors/transformer_engineex_impl.py TERecipeState.__call__ keeps its state only while "
    "`self.parent_recipe is recipe`, else makes a new RecipeState (transformer_engine_v2ex_impl.py in 0.2.3-0.2.5 too); "
    "eager TE (module/base.py init_fp8_metadata, set_meta_tensor) keeps the state across DelayedScaling recipes, adjusting "
    "the amax history length. An inline te.autocast(recipe=DelayedScaling()) never accumulates an amax history",
    model=models.FRESH_STATE_PER_RECIPE,
    seen=(FEATURES_RUN,),
)
