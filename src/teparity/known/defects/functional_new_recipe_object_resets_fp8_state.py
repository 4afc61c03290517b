"""Known upstream defect ``functional-new-recipe-object-resets-fp8-state``: thunder's functional TE executor starts a
new FP8 state whenever the recipe object changes, where eager TE keeps each module's state across DelayedScaling
recipes."""

from __future__ import annotations

from teparity import checks
from teparity.known import models, signatures
from teparity.known.defect import KnownDefect

ENTRY = KnownDefect(
    id="functional-new-recipe-object-resets-fp8-state",
    summary="thunder's functional TE executor starts a new FP8 state whenever the recipe object changes, where "
    "eager TE keeps each module's state across DelayedScaling recipes",
    executors=("functional",),
    signature=signatures.STATE_RESTARTS_EACH_STEP,
    checks=("recipe-change[alternate]", "recipe-change[rebuilt]", "fp8-switched[no-autocast]"),
    thunder=">=0.2.3",
    te=">=2.9",
    cause="thunder/executors/transformer_engineex_impl.py TERecipeState.__call__ keeps its state only while "
    "`self.parent_recipe is recipe`, else makes a new RecipeState (transformer_engine_v2ex_impl.py in 0.2.3-0.2.5 too); "
    "eager TE (module/base.py init_fp8_metadata, set_meta_tensor) keeps the state across DelayedScaling recipes, adjusting "
    "the amax history length. An inline te.autocast(recipe=DelayedScaling()) never accumulates an amax history, nor does a "
    "program run outside any autocast: FP8GlobalStateManager.get_fp8_recipe() is then TE's get_default_fp8_recipe(), a new "
    "object at every call",
    model=models.FRESH_STATE_PER_RECIPE,
    seen=("docs/results/h200-te2.20.2-aa780f0-features", "docs/results/h100-te2.9.0-te2.20.2-b1f1fda-switching-rows"),
)
