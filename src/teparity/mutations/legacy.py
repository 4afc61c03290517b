"""Patches of the legacy TE executor (``TELinear`` modules and the backward FP8 sync ``te_sync_fp8_meta_bwd``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teparity.mutations.patching import PERTURBATION, override
from teparity.stack.executors import executor_module, find_te_executors
from teparity.stack.symbols import BACKWARD_SYNC_SYMBOL, SYNC_INSERTION_HELPER


def legacy_module() -> Any:
    info = find_te_executors()["legacy"]
    if not info.has_backward_sync:
        raise LookupError(f"cannot inject: this thunder's legacy TE executor has no {BACKWARD_SYNC_SYMBOL}")
    return executor_module(info)


def patch_sync_insertion(place: Callable[[list[Any], Any], None]) -> None:
    """Replace the legacy executor's sync insertion; ``place(bound_symbols, sync_bsym)`` puts the sync."""
    module = legacy_module()

    def insert(bw_extrace: Any) -> None:
        place(bw_extrace.bound_symbols, getattr(module, BACKWARD_SYNC_SYMBOL).bind(output=None))

    insert.__qualname__ = f"teparity_mutant_{SYNC_INSERTION_HELPER}"
    setattr(module, SYNC_INSERTION_HELPER, insert)


def place_after_return(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.append(sync)  # thunder before PR #591: insert(len(...) - 1 + 1)


def place_nowhere(bound_symbols: list[Any], sync: Any) -> None:
    del bound_symbols, sync


def place_twice(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.insert(len(bound_symbols) - 1, sync)
    bound_symbols.insert(len(bound_symbols) - 1, sync)


def perturb_scale() -> None:
    """After each backward sync, nudge the forward scales of thunder's TE modules: the state the next
    forward uses, and the one the snapshot at the end of the step reads (TE's forward update at the
    autocast exit would overwrite a nudge made during the forward)."""
    import weakref

    module = legacy_module()
    modules: weakref.WeakSet[Any] = weakref.WeakSet()
    real_init = module.TELinear.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        modules.add(self)

    module.TELinear.__init__ = init
    manager = module.FP8GlobalStateManager

    def reduce_and_update(*args: Any, **kwargs: Any) -> Any:
        result = manager.reduce_and_update_fp8_tensors(*args, **kwargs)
        for te_module in modules:
            te_module.fp8_meta["scaling_fwd"].scale.mul_(PERTURBATION)
        return result

    override(module, "FP8GlobalStateManager", "reduce_and_update_fp8_tensors", reduce_and_update)


def first_module_token_kept() -> None:
    """TELinear no longer consumes TE's first-module token, so TE's own backward sync fires as well."""
    override(legacy_module(), "FP8GlobalStateManager", "is_first_fp8_module", lambda: False)


def patch_autocast_wrapper(wrapper: Callable[[Any], str]) -> None:
    """Replace the decorator line that thunder's trace printer puts on the legacy forward program."""
    module = legacy_module()
    if not hasattr(module, "_get_te_wrapper_string"):
        raise LookupError("cannot inject: this thunder's legacy executor has no _get_te_wrapper_string")
    module._get_te_wrapper_string = lambda: wrapper(module)
