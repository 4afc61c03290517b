"""Patches of the functional TE executor (its per-linear amax/scale update, its grad transform, its recipe
state, its activation-checkpointing transform)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teparity.mutations.patching import PERTURBATION, override
from teparity.stack.executors import find_te_executors, implementation_module


def implementation() -> Any:
    """The functional executor's implementation module (``<executor module>_impl``), where the
    per-linear update calls TE's Python ``_amax_and_scale_update`` and ``torch_dist``."""
    info = find_te_executors()["functional"]
    if not info.executor_present or (impl := implementation_module(info.module)) is None:
        raise LookupError(f"cannot inject: no usable functional TE executor ({info.label()})")
    return impl


def patch_update(replacement: Callable[[Callable[..., Any], tuple[Any, ...]], Any]) -> None:
    """Put ``replacement(real, args)`` in place of the functional executor's call of TE's Python
    ``_amax_and_scale_update(amax_history, scale, fp8_max, recipe)`` (one call per recipe state)."""
    impl = implementation()
    real = impl._amax_and_scale_update
    impl._amax_and_scale_update = lambda *args: replacement(real, args)


def dropped(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    del real, args


def twice(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    real(*args)
    real(*args)


def perturbed(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    real(*args)
    args[1].mul_(PERTURBATION)  # args: (amax_history, scale, fp8_max, recipe)


def checkpointing_transform_skipped() -> None:
    """thunder's TE activation-checkpointing transform does nothing: a recomputed linear keeps its own
    amax/scale update, so a checkpointed linear's FP8 state is updated twice per step."""
    import thunder.executors.transformer_engineex as te_executor

    if getattr(te_executor, "_te_activation_checkpointing_transform", None) is None:
        raise LookupError("cannot inject: this thunder has no _te_activation_checkpointing_transform")
    te_executor._te_activation_checkpointing_transform = lambda trace: trace


def recipe_state_kept() -> None:
    """The functional executor's ``TERecipeState`` keeps the first FP8 state it made, whatever recipe object
    it is called with next: a recipe change reuses the old state. Eager TE too keeps one state per module
    across DelayedScaling recipes, yet this is no fix of ``functional-new-recipe-object-resets-fp8-state``:
    on TE 2.20.2 ``recipe-change[alternate]`` then parts from eager TE at step 2, a failure outside that
    entry's signature (docs/results/h200-te2.20.2-2bafd7a-killmatrix)."""
    state_class = _recipe_state_class()
    real = state_class.__call__

    def call(self: Any, recipe: Any, mode: str, num_quantizers: int) -> Any:
        return self.state if self.state is not None else real(self, recipe, mode, num_quantizers)

    state_class.__call__ = call


def recompile_carries_another_state() -> None:
    """A recipe state made after another of its direction was updated (a cache entry compiled later: a new input
    shape, a new compilation) starts from the newest such state's amax history and scale instead of a fresh one: a
    recompile carries another linear's FP8 state. The states of one compilation are all made before any update, so a
    program compiled once is untouched."""
    state_class = _recipe_state_class()
    real = state_class.__call__
    made_by_mode: dict[str, list[Any]] = {}

    def call(self: Any, recipe: Any, mode: str, num_quantizers: int) -> Any:
        fresh = self.state is None
        state = real(self, recipe, mode, num_quantizers)
        if fresh and hasattr(state, "amax_history"):
            updated = [made for made in made_by_mode.get(mode, ()) if made.amax_history.shape == state.amax_history.shape
                       and bool(made.amax_history[1:].ne(0).any())]
            if updated:
                state.amax_history.copy_(updated[-1].amax_history)
                state.scale.copy_(updated[-1].scale)
            made_by_mode.setdefault(mode, []).append(state)
        return state

    state_class.__call__ = call


def _recipe_state_class() -> Any:
    """The functional executor's ``TERecipeState`` (one per linear and direction: the recipe state it keeps)."""
    impl = implementation()
    state_class = getattr(impl, "TERecipeState", None)
    if state_class is None:
        raise LookupError(f"cannot inject: {impl.__name__} has no TERecipeState")
    return state_class


def no_cross_rank_reduction() -> None:
    """The functional executor's amax all-reduce becomes a no-op (before thunder PR #2404)."""
    override(implementation(), "torch_dist", "all_reduce", lambda *args, **kwargs: None)


def no_forward_reduction_under_fsdp() -> None:
    """Under thunder's FSDP only, the functional executor's forward amax updates skip their all-reduce: each rank's
    forward scales follow its own inputs, while DDP runs (and every backward update) reduce as before. The forward
    of a module that ``thunder.distributed.fsdp`` returned is marked while it runs."""
    import threading

    import thunder.distributed

    impl = implementation()
    real_all_reduce, real_fsdp = impl.torch_dist.all_reduce, thunder.distributed.fsdp
    forward = threading.local()

    def fsdp(*args: Any, **kwargs: Any) -> Any:
        network = real_fsdp(*args, **kwargs)
        real_forward = network.forward

        def marked(*inputs: Any, **named: Any) -> Any:
            forward.under_fsdp = True
            try:
                return real_forward(*inputs, **named)
            finally:
                forward.under_fsdp = False

        network.forward = marked
        return network

    thunder.distributed.fsdp = fsdp
    override(impl, "torch_dist", "all_reduce",
             lambda *args, **kwargs: None if getattr(forward, "under_fsdp", False) else real_all_reduce(*args, **kwargs))


def fp8_group_ignored() -> None:
    """The functional update's reduction asks TE for the fp8 group and gets None: the default group."""
    impl = implementation()
    override(impl, "FP8GlobalStateManager", "get_fp8_group", lambda: None)


def grad_transform(*, recompute_forward: bool = False, backward_update: bool = True) -> None:
    """Replace the functional executor's grad transform of linear with thunder 0.2.5+'s, changed:
    ``recompute_forward`` recomputes the forward TE linear in the backward (for the quantized input and
    weight) instead of saving them; ``backward_update=False`` leaves out the backward amax/scale update."""
    impl = implementation()
    needed = ("_get_te_fp8_recipe", "_get_te_fp8_state", "_get_te_fp8_quantizers", "_te_linear_fwd", "_te_linear_bwd",
              "_te_fp8_amax_and_scale_update", "get_grad", "put_grad", "ltorch", "linear_prim", "transformer_engine_ex")
    if missing := [name for name in needed if not hasattr(impl, name)]:
        raise LookupError(f"cannot inject: {impl.__name__} lacks {missing}")

    def grad_transform(a: Any, w: Any, bias: Any) -> Any:
        recipe = impl._get_te_fp8_recipe()
        forward_state = impl._get_te_fp8_state(recipe, "forward", 2)
        input_quantizer, weight_quantizer = impl._get_te_fp8_quantizers(forward_state, 2)
        primal, quantized_a, quantized_w = impl._te_linear_fwd(a, w, bias, input_quantizer, weight_quantizer)
        primal, quantized_a, quantized_w = impl._te_fp8_amax_and_scale_update(
            recipe, states=(forward_state,), tokens=(primal, quantized_a, quantized_w)
        )
        grad_out = impl.get_grad(primal)
        if recompute_forward:  # on a clone of the input: common-subexpression elimination keeps it
            _, quantized_a, quantized_w = impl._te_linear_fwd(impl.ltorch.clone(a), w, bias, input_quantizer, weight_quantizer)
        backward_state = impl._get_te_fp8_state(recipe, "backward", 1)
        (grad_output_quantizer,) = impl._get_te_fp8_quantizers(backward_state, 1)
        grad_a, grad_w = impl._te_linear_bwd(
            grad_out, quantized_a, quantized_w, input_quantizer, weight_quantizer, grad_output_quantizer
        )
        if backward_update:
            grad_a, grad_w = impl._te_fp8_amax_and_scale_update(recipe, states=(backward_state,), tokens=(grad_a, grad_w))
        impl.put_grad(a, grad_a)
        impl.put_grad(w, grad_w)
        if bias is not None:
            impl.put_grad(bias, impl.ltorch.sum(grad_out, tuple(range(grad_out.ndim - 1))))
        return primal

    impl.transformer_engine_ex.implmap[impl.linear_prim.id].grad_transform = grad_transform


def thunder_torch_linear_off_under_no_grad() -> None:
    """The linears thunder leaves to torch under ``torch.no_grad`` come out 1% off: ``torch.nn.functional.linear``
    scaled where a thunder-generated program calls it with grad disabled (thunder's programs are compiled from files
    named ``thunder.*``; eager modules call it from torch's own files, unchanged)."""
    import sys

    import torch

    real = torch.nn.functional.linear

    def linear(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        caller = sys._getframe(1).f_code.co_filename
        return out * NO_GRAD_OFF if not torch.is_grad_enabled() and caller.startswith("thunder.") else out

    torch.nn.functional.linear = linear


#: How far ``thunder_torch_linear_off_under_no_grad`` moves a linear's output.
NO_GRAD_OFF = 1.01


def new_recipe_state_of_another_history() -> None:
    """When the recipe object changes, the functional executor's new recipe state gets half the recipe's amax history
    length: a recipe change's fresh state is built from the wrong recipe."""
    import dataclasses

    state_class = _recipe_state_class()
    real = state_class.__call__

    def call(self: Any, recipe: Any, mode: str, num_quantizers: int) -> Any:
        if self.state is None or self.parent_recipe is recipe:
            return real(self, recipe, mode, num_quantizers)
        shorter = dataclasses.replace(recipe, amax_history_len=max(1, recipe.amax_history_len // 2))
        state = real(self, shorter, mode, num_quantizers)
        self.parent_recipe = recipe
        return state

    state_class.__call__ = call


def no_sync_weight_grads_scaled() -> None:
    """Under ``skip_data_parallel_grad_sync`` (the micro-batches that accumulate without the all-reduce) the
    functional executor's weight gradients come out scaled by ``PERTURBATION``; the synced micro-batch is unchanged."""
    import thunder.distributed

    impl = implementation()
    basic = getattr(impl, "BasicLinear", None)
    if basic is None:
        raise LookupError(f"cannot inject: {impl.__name__} has no BasicLinear")
    real = basic._functional_backward

    def backward(*args: Any, **kwargs: Any) -> Any:
        grad_input, grad_weight, *rest = real(*args, **kwargs)
        if thunder.distributed.get_skip_data_parallel_grad_sync() and grad_weight is not None:
            grad_weight = grad_weight * PERTURBATION
        return (grad_input, grad_weight, *rest)

    override(impl, "BasicLinear", "_functional_backward", backward)


def fp8_group_amax_summed() -> None:
    """Where the caller's FP8 autocast names an fp8 group, the functional executor's amax all-reduce sums the ranks'
    amaxes instead of taking their maximum; without a group (plain DDP) it is unchanged."""
    import torch.distributed as dist
    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager

    impl = implementation()
    real = impl.torch_dist.all_reduce

    def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if FP8GlobalStateManager.get_fp8_group() is not None:
            kwargs["op"] = dist.ReduceOp.SUM
        return real(tensor, *args, **kwargs)

    override(impl, "torch_dist", "all_reduce", all_reduce)
