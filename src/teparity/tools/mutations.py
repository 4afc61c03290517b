"""Known regressions of thunder's TE executors, injectable into the installed thunder at run time.

Each entry patches the real thunder in the current process. ``pytest --teparity-inject NAME`` applies
it in every test process and, through ``TEPARITY_INJECT``, in every spawned rank, so that the gate can
be shown to fail on the regression it exists to catch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Literal

from teparity.stack.versions import (
    BACKWARD_SYNC_SYMBOL,
    DDP_OF_JITTED_SINCE,
    SYNC_INSERTION_HELPER,
    Environment,
    ddp_input_grad_reason,
    executor_module,
    find_te_executors,
    implementation_module,
    parse_version,
)

ENV_VAR = "TEPARITY_INJECT"


Requirement = Literal[
    "legacy-sync", "legacy-te", "functional-te", "functional-fp8-group", "functional-checkpointing", "te",
    "ddp-transform", "fsdp-transform",
]
#: The first release whose functional executor has ``_te_activation_checkpointing_transform`` (read in the
#: wheels: 0.2.5.dev20250720 has none, 0.2.5 has it).
CHECKPOINTING_TRANSFORM_SINCE = "0.2.5"


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    #: What the installed stack must have for the mutation to apply (the apply function checks too).
    requires: Requirement
    apply: Callable[[], None]

    def unavailable_reason(self, env: Environment) -> str | None:
        """Why this mutation does not apply here, or None."""
        if self.requires == "legacy-sync":
            return env.backward_sync_reason()
        if self.requires == "legacy-te":
            return env.backward_sync_reason() or env.fp8_reason()
        if self.requires == "functional-te":
            return env.executor_reason("functional") or env.fp8_reason()
        if self.requires == "functional-fp8-group":
            if reason := env.executor_reason("functional") or env.fp8_reason():
                return reason
            if not env.executors["functional"].honors_fp8_group:
                return (
                    f"lightning-thunder {env.versions.thunder}'s functional executor already reduces over the "
                    "default group (the strict xfail of ddp-fp8-group-per-rank): this regression needs a build "
                    "that honours fp8_group"
                )
            return None
        if self.requires == "functional-checkpointing":
            if reason := env.executor_reason("functional") or env.fp8_reason():
                return reason
            version = parse_version(env.versions.thunder or "")
            if version is not None and version < parse_version(CHECKPOINTING_TRANSFORM_SINCE):
                return (f"lightning-thunder {env.versions.thunder} has no _te_activation_checkpointing_transform "
                        f"(from {CHECKPOINTING_TRANSFORM_SINCE})")
            return None
        if self.requires == "ddp-transform":
            return _ddp_transform_reason(env)
        if self.requires == "fsdp-transform":
            return env.thunder_reason()
        return env.fp8_reason()


def _ddp_transform_reason(env: Environment) -> str | None:
    """Why the DDP-transform mutant does not apply: no ``DDPTransform`` to patch, or the check that must
    kill it is a known defect on this build (it raises before any gradient is reduced)."""
    if reason := env.thunder_reason():
        return reason
    version = parse_version(env.versions.thunder or "")
    if version is not None and version < DDP_OF_JITTED_SINCE:
        return (f"lightning-thunder {env.versions.thunder} has no DDPTransform (thunder.distributed.transforms.ddp_v2, "
                f"from {DDP_OF_JITTED_SINCE})")
    return ddp_input_grad_reason(env.versions.thunder)


def _legacy_module() -> Any:
    info = find_te_executors()["legacy"]
    if not info.has_backward_sync:
        raise LookupError(f"cannot inject: this thunder's legacy TE executor has no {BACKWARD_SYNC_SYMBOL}")
    return executor_module(info)


def _patch_sync_insertion(place: Callable[[list[Any], Any], None]) -> None:
    """Replace the legacy executor's sync insertion; ``place(bound_symbols, sync_bsym)`` puts the sync."""
    module = _legacy_module()

    def insert(bw_extrace: Any) -> None:
        place(bw_extrace.bound_symbols, getattr(module, BACKWARD_SYNC_SYMBOL).bind(output=None))

    insert.__qualname__ = f"teparity_mutant_{SYNC_INSERTION_HELPER}"
    setattr(module, SYNC_INSERTION_HELPER, insert)


def _after_return(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.append(sync)  # thunder before PR #591: insert(len(...) - 1 + 1)


def _missing(bound_symbols: list[Any], sync: Any) -> None:
    del bound_symbols, sync


def _duplicated(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.insert(len(bound_symbols) - 1, sync)
    bound_symbols.insert(len(bound_symbols) - 1, sync)


PERTURBATION = 1 + 2**-10


def _functional_impl() -> Any:
    """The functional executor's implementation module (``<executor module>_impl``), where the
    per-linear update calls TE's Python ``_amax_and_scale_update`` and ``torch_dist``."""
    info = find_te_executors()["functional"]
    if not info.executor_present or (impl := implementation_module(info.module)) is None:
        raise LookupError(f"cannot inject: no usable functional TE executor ({info.label()})")
    return impl


def _patch_functional_update(replacement: Callable[[Callable[..., Any], tuple[Any, ...]], Any]) -> None:
    """Put ``replacement(real, args)`` in place of the functional executor's call of TE's Python
    ``_amax_and_scale_update(amax_history, scale, fp8_max, recipe)`` (one call per recipe state)."""
    impl = _functional_impl()
    real = impl._amax_and_scale_update
    impl._amax_and_scale_update = lambda *args: replacement(real, args)


def _dropped(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    del real, args


def _twice(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    real(*args)
    real(*args)


def _perturbed(real: Callable[..., Any], args: tuple[Any, ...]) -> None:
    real(*args)
    args[1].mul_(PERTURBATION)  # args: (amax_history, scale, fp8_max, recipe)


def _perturb_legacy_scale() -> None:
    """After each backward sync, nudge the forward scales of thunder's TE modules: the state the next
    forward uses, and the one the snapshot at the end of the step reads (TE's forward update at the
    autocast exit would overwrite a nudge made during the forward)."""
    import weakref

    module = _legacy_module()
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

    _override(module, "FP8GlobalStateManager", "reduce_and_update_fp8_tensors", reduce_and_update)


def _checkpointing_transform_skipped() -> None:
    """thunder's TE activation-checkpointing transform does nothing: a recomputed linear keeps its own
    amax/scale update, so a checkpointed linear's FP8 state is updated twice per step."""
    import thunder.executors.transformer_engineex as te_executor

    if getattr(te_executor, "_te_activation_checkpointing_transform", None) is None:
        raise LookupError("cannot inject: this thunder has no _te_activation_checkpointing_transform")
    te_executor._te_activation_checkpointing_transform = lambda trace: trace


def _recipe_state_kept() -> None:
    """The functional executor's ``TERecipeState`` keeps the first FP8 state it made, whatever recipe object
    it is called with next: a recipe change reuses the old state. Eager TE too keeps one state per module
    across DelayedScaling recipes, yet this is no fix of ``functional-new-recipe-object-resets-fp8-state``:
    on TE 2.20.2 ``recipe-change[alternate]`` then parts from eager TE at step 2, a failure outside that
    entry's signature (docs/results/h200-te2.20.2-sixth/, call2)."""
    impl = _functional_impl()
    state_class = getattr(impl, "TERecipeState", None)
    if state_class is None:
        raise LookupError(f"cannot inject: {impl.__name__} has no TERecipeState")
    real = state_class.__call__

    def call(self: Any, recipe: Any, mode: str, num_quantizers: int) -> Any:
        return self.state if self.state is not None else real(self, recipe, mode, num_quantizers)

    state_class.__call__ = call


def _linear_not_downcast_under_autocast() -> None:
    """thunder's autocast rule for linear stops downcasting: under ``torch.autocast`` the linear gets the fp32
    operands (on CPU, thunder 0.2.6, the grad transform then raises on a bfloat16 gradient for an fp32
    parameter)."""
    import thunder.transforms.autocast as autocast

    if getattr(autocast, "_linear_autocast_impl", None) is None:
        raise LookupError("cannot inject: this thunder's autocast has no _linear_autocast_impl")
    autocast._linear_autocast_impl = lambda a, w, bias, dtype: autocast.prims.linear(a, w, bias)


def _decline_every_linear() -> None:
    """Every TE executor's checker says no: thunder silently runs the linears in torch."""
    patched = 0
    for info in find_te_executors().values():
        executor = getattr(executor_module(info), info.attribute) if info.found else None
        for impl in getattr(executor, "implmap", {}).values():
            if impl.checker is not None:
                impl.checker = lambda *args, **kwargs: False
                patched += 1
    if not patched:
        raise LookupError("cannot inject: no TE executor with a checker")


def _override(module: Any, attribute: str, member: str, replacement: Callable[..., Any]) -> None:
    """Put in place of ``module.attribute`` a proxy that delegates everything but ``member``: the
    change reaches only code that looks the name up in ``module`` (thunder's, not eager TE's)."""
    real = getattr(module, attribute)

    class Override:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    setattr(Override, member, staticmethod(replacement))
    setattr(module, attribute, Override())


def _no_cross_rank_reduction() -> None:
    """The functional executor's amax all-reduce becomes a no-op (before thunder PR #2404)."""
    _override(_functional_impl(), "torch_dist", "all_reduce", lambda *args, **kwargs: None)


def _fp8_group_ignored() -> None:
    """The functional update's reduction asks TE for the fp8 group and gets None: the default group."""
    impl = _functional_impl()
    _override(impl, "FP8GlobalStateManager", "get_fp8_group", lambda: None)


def _first_module_token_kept() -> None:
    """TELinear no longer consumes TE's first-module token, so TE's own backward sync fires as well."""
    _override(_legacy_module(), "FP8GlobalStateManager", "is_first_fp8_module", lambda: False)


def _one_gradient_not_reduced() -> None:
    """thunder's DDPTransform leaves the module's last parameter out of the replicated ones: it is not
    synchronized, so its gradient is never all-reduced (each rank keeps its own)."""
    from thunder.distributed.transforms import ddp_v2

    real = ddp_v2.DDPTransform.transform_module

    def transform_module(self: Any, model: Any) -> None:
        real(self, model)
        del self.replicated_params[list(self.replicated_params)[-1]]

    ddp_v2.DDPTransform.transform_module = transform_module


def _fsdp_gradient_not_reduced() -> None:
    """The backward of FSDP's ``synchronize`` (``thunder.distributed.prims``, registered in
    ``thunder.core.transforms.backward_impls``) keeps this rank's dim-0 slice of its own pre-averaged
    gradient instead of reduce-scattering it: the sharded gradients are never summed across ranks.
    DDP's (REPLICATED) synchronize is left as it is."""
    import torch.distributed as dist
    from thunder.core import transforms
    from thunder.core.proxies import DistParallelType
    from thunder.distributed.prims import PrimIDs

    real = transforms.backward_impls[PrimIDs.SYNCHRONIZE]

    def backward(distparallel_type: Any, group: Any, grad: Any) -> Any:
        if distparallel_type != DistParallelType.FULLY_SHARDED:
            return real(distparallel_type, group, grad)
        size, rank = group.size(), dist.get_rank(group)
        chunk = grad.shape[0] // size
        return (grad / size)[rank * chunk:(rank + 1) * chunk], None

    transforms.backward_impls[PrimIDs.SYNCHRONIZE] = backward


def _patch_autocast_wrapper(wrapper: Callable[[Any], str]) -> None:
    """Replace the decorator line that thunder's trace printer puts on the legacy forward program."""
    module = _legacy_module()
    if not hasattr(module, "_get_te_wrapper_string"):
        raise LookupError("cannot inject: this thunder's legacy executor has no _get_te_wrapper_string")
    module._get_te_wrapper_string = lambda: wrapper(module)


def _functional_grad_transform(*, recompute_forward: bool = False, backward_update: bool = True) -> None:
    """Replace the functional executor's grad transform of linear with thunder 0.2.5+'s, changed:
    ``recompute_forward`` recomputes the forward TE linear in the backward (for the quantized input and
    weight) instead of saving them; ``backward_update=False`` leaves out the backward amax/scale update."""
    impl = _functional_impl()
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


CATALOG: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "sync-after-return",
            "the backward FP8 sync appended after the backward trace's return, so it never runs "
            "(the bug fixed by thunder PR #591, 2024-06-14)",
            "legacy-sync",
            lambda: _patch_sync_insertion(_after_return),
        ),
        Mutation(
            "sync-missing",
            "the backward FP8 sync never inserted: backward amax/scale updates silently stop",
            "legacy-sync",
            lambda: _patch_sync_insertion(_missing),
        ),
        Mutation(
            "sync-duplicated",
            "the backward FP8 sync inserted twice: amax histories roll twice per step",
            "legacy-sync",
            lambda: _patch_sync_insertion(_duplicated),
        ),
        Mutation(
            "legacy-scale-perturbed",
            f"the legacy executor's forward scales off by a factor {PERTURBATION} after every backward sync",
            "legacy-te",
            _perturb_legacy_scale,
        ),
        Mutation(
            "functional-scale-perturbed",
            f"the functional executor's scale update off by a factor {PERTURBATION}",
            "functional-te",
            lambda: _patch_functional_update(_perturbed),
        ),
        Mutation(
            "functional-amax-update-dropped",
            "the functional executor's per-linear amax/scale update does nothing",
            "functional-te",
            lambda: _patch_functional_update(_dropped),
        ),
        Mutation(
            "functional-no-cross-rank-reduction",
            "the functional amax update without its cross-rank all-reduce (before thunder PR #2404)",
            "functional-te",
            _no_cross_rank_reduction,
        ),
        Mutation(
            "fp8-group-ignored",
            "the functional amax reduction over the default group instead of fp8_autocast's fp8_group",
            "functional-fp8-group",
            _fp8_group_ignored,
        ),
        Mutation(
            "first-module-token-kept",
            "the legacy executor stops consuming TE's first-module token, so TE syncs in backward too",
            "legacy-te",
            _first_module_token_kept,
        ),
        Mutation(
            "autocast-wrapper-dropped",
            "the legacy forward program no longer wrapped in fp8_autocast: TE's modules run outside FP8",
            "legacy-te",
            lambda: _patch_autocast_wrapper(lambda module: "# teparity mutant: fp8_autocast wrapper dropped"),
        ),
        Mutation(
            "autocast-recipe-dropped",
            "the legacy forward wrapped in fp8_autocast() without the recipe the user passed: TE's default "
            "recipe runs (numerically invisible when the user's recipe is the default)",
            "legacy-te",
            lambda: _patch_autocast_wrapper(lambda module: module.TE_CTX_STR.replace(f"fp8_recipe={module.FP8_RECIPE_KEY}", "")),
        ),
        Mutation(
            "forward-linear-recomputed",
            "the functional backward recomputes each forward TE linear instead of using the saved "
            "quantized tensors: a second GEMM per linear, and its quantization writes the amaxes again",
            "functional-te",
            lambda: _functional_grad_transform(recompute_forward=True),
        ),
        Mutation(
            "functional-backward-update-missing",
            "the functional grad transform without the backward amax/scale update: grad_output scales never move",
            "functional-te",
            lambda: _functional_grad_transform(backward_update=False),
        ),
        Mutation(
            "amax-updates-duplicated",
            "every functional amax/scale update applied twice: histories roll twice per step",
            "functional-te",
            lambda: _patch_functional_update(_twice),
        ),
        Mutation(
            "checkpointing-transform-skipped",
            "thunder's TE activation-checkpointing transform skipped: the recomputed linears update their FP8 "
            "state again in the backward (twice per step)",
            "functional-checkpointing",
            _checkpointing_transform_skipped,
        ),
        Mutation(
            "recipe-change-state-kept",
            "the functional executor's recipe state reused across recipe objects: a recipe change keeps the "
            "old FP8 state",
            "functional-te",
            _recipe_state_kept,
        ),
        Mutation(
            "autocast-linear-not-downcast",
            "thunder's autocast rule for linear no longer downcasts its operands: under torch.autocast the linear "
            "gets fp32 operands where eager TE's autocast computes in bfloat16",
            "te",
            _linear_not_downcast_under_autocast,
        ),
        Mutation(
            "ddp-gradient-not-reduced",
            "thunder's DDP transform leaves the last parameter unsynchronized: its gradient is never all-reduced",
            "ddp-transform",
            _one_gradient_not_reduced,
        ),
        Mutation(
            "fsdp-gradient-not-reduced",
            "thunder's FSDP backward keeps each rank's own slice of its gradient instead of reduce-scattering it: "
            "sharded gradients are never summed across ranks",
            "fsdp-transform",
            _fsdp_gradient_not_reduced,
        ),
        Mutation(
            "checker-declines",
            "every TE executor's checker declines every linear: a silent fallback to torch",
            "te",
            _decline_every_linear,
        ),
    )
}


def active() -> list[str]:
    """Names of the mutations requested for this process tree."""
    return [name for name in os.environ.get(ENV_VAR, "").split(",") if name]


def apply(names: list[str]) -> None:
    unknown = [name for name in names if name not in CATALOG]
    if unknown:
        raise KeyError(f"unknown mutation(s) {unknown}; the catalog has {sorted(CATALOG)}")
    for name in names:
        CATALOG[name].apply()


def apply_from_env() -> None:
    """Apply what ``TEPARITY_INJECT`` asks for (called at the start of every rank)."""
    apply(active())
