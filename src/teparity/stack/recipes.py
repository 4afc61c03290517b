"""The FP8 recipes the tiers run, by id; built only where TE imports (in a rank or a GPU test).

Ids are plain strings so that every pytest-xdist worker collects the same items (docs/conventions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teparity.stack.executors import ExecutorKind
from teparity.stack.reasons import recipe_declined

if TYPE_CHECKING:
    from teparity.stack.environment import Environment

#: id -> (recipe class, keyword arguments). Non-default DelayedScaling settings cover both formats,
#: both amax algorithms, a short history (rolled within the run) and a margin.
RECIPES: dict[str, tuple[str, dict[str, Any]]] = {
    "delayed": ("DelayedScaling", {}),
    "delayed-e4m3-len4-max": ("DelayedScaling", {"fp8_format": "E4M3", "amax_history_len": 4, "amax_compute_algo": "max"}),
    "delayed-hybrid-len8-recent-margin1": (
        "DelayedScaling",
        {"fp8_format": "HYBRID", "amax_history_len": 8, "amax_compute_algo": "most_recent", "margin": 1},
    ),
    "current": ("Float8CurrentScaling", {}),
    #: The default but for its margin: a recipe change that keeps the history length and formats.
    "delayed-margin1": ("DelayedScaling", {"margin": 1}),
    #: TE's 128-element blocks (1-D for activations and gradients, 128 x 128 for weights), E4M3 both ways.
    "blockwise": ("Float8BlockScaling", {}),
}
#: The recipes the numerics tier runs each executor on.
RECIPE_IDS = ("delayed", "delayed-e4m3-len4-max", "delayed-hybrid-len8-recent-margin1", "current", "blockwise")


def build(recipe_id: str) -> Any:
    from transformer_engine.common import recipe as te_recipe

    class_name, kwargs = RECIPES[recipe_id]
    if "fp8_format" in kwargs:
        kwargs = {**kwargs, "fp8_format": getattr(te_recipe.Format, kwargs["fp8_format"])}
    return getattr(te_recipe, class_name)(**kwargs)


def declined(recipe_id: str, executor: ExecutorKind, env: Environment) -> str | None:
    """Why this executor / installed TE / GPU cannot run this recipe, or None (``teparity.stack.reasons``)."""
    return recipe_declined(RECIPES[recipe_id][0], executor, env)
