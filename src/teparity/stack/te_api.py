"""TransformerEngine's API as each release spells it. Imports TE only when called (in ranks or GPU tests)."""

from __future__ import annotations

from typing import Any


def fp8_global_state_manager() -> Any:
    """TE's ``FP8GlobalStateManager``: ``transformer_engine.pytorch.quantization`` from 2.9, ``.fp8`` before."""
    try:
        from transformer_engine.pytorch.quantization import FP8GlobalStateManager
    except ImportError:
        from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
    return FP8GlobalStateManager


def te_autocast(recipe: Any, group: Any | None = None, *, enabled: bool = True) -> Any:
    """TE's FP8 autocast context (``enabled=False``: FP8 turned off inside it): ``te.autocast(recipe=,
    amax_reduction_group=)`` from 2.9 (where ``fp8_autocast`` is deprecated), ``te.fp8_autocast(fp8_recipe=,
    fp8_group=)`` before."""
    import transformer_engine.pytorch as te

    if hasattr(te, "autocast"):
        return te.autocast(enabled=enabled, recipe=recipe, amax_reduction_group=group)
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe, fp8_group=group)
