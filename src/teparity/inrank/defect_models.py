"""Eager models of known upstream defects, inside a rank: eager TE built to do what thunder does wrong, so that a test
a known defect covers still compares every output, gradient and FP8 state, against the model
(``teparity.records.EAGER_MODELS`` names them; ``teparity.known.models`` says which entry each serves).

Each is an ``nn.Module`` over the plain network's parameters: ``choose(recipe, synced)`` runs before each forward (the
recipe object of the step; whether the micro-batch all-reduces its gradients), ``state_module()`` is the module whose
FP8 state a step's snapshot reads (the one thunder's last trace holds).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch

from teparity.inrank.fp8state import live_scaling_tensors
from teparity.inrank.networks import SECOND_CALL, te_linear, te_twin, without_fp8_state
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
from teparity.stack.te_api import te_autocast


class _Model(torch.nn.Module):
    def choose(self, recipe: Any, synced: bool) -> None:
        """Nothing to choose: one module, one state."""

    def state_module(self) -> torch.nn.Module:
        raise NotImplementedError

    def trained(self) -> torch.nn.Module:
        """The module whose parameters the optimizer steps (named as the plain network's)."""
        return self.state_module()


class TorchLinears(_Model):
    """Every linear run by torch (no TE module, no FP8 state): what thunder runs where TE claimed no linear."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self.plain = plain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.plain(x)

    def state_module(self) -> torch.nn.Module:
        return self.plain


def tie_parameters(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Make ``target`` train ``source``'s very parameters (same names), so that two twins are one network with two
    FP8 states."""
    for name, parameter in source.named_parameters():
        owner, _, leaf = name.rpartition(".")
        setattr(target.get_submodule(owner) if owner else target, leaf, parameter)


class _Twins(_Model):
    """``te.Linear`` twins of the plain network sharing its parameters, each with its own FP8 state, as each thunder
    cache entry or recipe state is; ``forward`` runs the chosen one."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self._plain = [plain]  # a list: not a child whose parameters would be trained twice
        self.twins = torch.nn.ModuleList([te_twin(plain)])
        self.active = 0

    def _new_twin(self) -> int:
        twin = te_twin(self._plain[0])
        tie_parameters(self.twins[0], twin)
        self.twins.append(twin)
        return len(self.twins) - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.twins[self.active](x)

    def trained(self) -> torch.nn.Module:
        return self.twins[0]

    def state_module(self) -> torch.nn.Module:
        return self.twins[self.active]


class StatePerCacheEntry(_Twins):
    """One FP8 state per thunder cache entry, where eager TE keeps one per module: an entry per input shape and per
    whether the input requires grad (an evaluation forward between training steps), and for the micro-batches without
    the gradient all-reduce another than for the one with it (``skip_data_parallel_grad_sync`` is part of thunder's
    cache key). A twin per entry, made at the entry's first forward.

    The legacy executor's states are TE modules (its ``TELinear``s): TE's global update at every autocast exit and
    backward moves each registered module's state, the idle entry's too, as it moves the twins'. The functional
    executor's are its traces' own (``get_te_fp8_state``): a state moves only when its trace runs. ``own_updates``
    models that: before each forward, every twin but the one that just ran is put back as it was after its own last
    run."""

    def __init__(self, plain: torch.nn.Module, *, own_updates: bool) -> None:
        super().__init__(plain)
        self._own_updates = own_updates
        self._after_own_run: dict[int, list[torch.Tensor]] = {}
        self._synced = True
        self._entries: dict[tuple[bool, tuple[int, ...], bool], int] = {}

    def choose(self, recipe: Any, synced: bool) -> None:
        self._synced = synced

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._own_updates:
            self._undo_updates_of_idle_twins()
        key = (self._synced, tuple(x.shape), x.requires_grad)
        if key not in self._entries:
            self._entries[key] = self._new_twin() if self._entries else 0
        self.active = self._entries[key]
        return super().forward(x)

    def _undo_updates_of_idle_twins(self) -> None:
        for index, twin in enumerate(self.twins):
            tensors = live_scaling_tensors(twin)
            if index == self.active:
                self._after_own_run[index] = [tensor.clone() for tensor in tensors]
            else:
                with torch.no_grad():
                    for tensor, kept in zip(tensors, self._after_own_run.get(index, ())):
                        tensor.copy_(kept)


class FreshStatePerRecipeObject(_Twins):
    """A fresh FP8 state whenever the recipe object is not the previous step's: thunder's functional executor keeps
    its recipe state only while ``parent_recipe is recipe``."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__(plain)
        self._recipe: Any = None

    def choose(self, recipe: Any, synced: bool) -> None:
        if self._recipe is not None and recipe is not self._recipe:
            self.active = self._new_twin()
        self._recipe = recipe


class StateRejoinsUpdateAfterTypeChange(_Model):
    """Eager TE whose delayed-scaling state, made anew when the recipe type changes back to DelayedScaling, joins TE's
    global amax buffer: what thunder's functional executor does with its own fresh state (updated after each GEMM).
    Eager TE registers a module in that buffer once (``add_fp8_tensors_to_global_buffer`` returns where
    ``fp8_meta`` holds its buffer index), so the new state's amax history and scale are never updated; dropping the
    index at a type change lets TE register the new state."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self.network = te_twin(plain)
        self._recipe_type: type | None = None

    def choose(self, recipe: Any, synced: bool) -> None:
        from teparity.stack.te_api import fp8_global_state_manager

        if self._recipe_type is not None and type(recipe) is not self._recipe_type:
            index = fp8_global_state_manager().get_buffer_info()
            for module in self.network.modules():
                getattr(module, "fp8_meta", {}).pop(index, None)
        self._recipe_type = type(recipe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)

    def state_module(self) -> torch.nn.Module:
        return self.network


class ResumedWithoutFp8State(_Model):
    """Eager TE whose checkpoint holds no FP8 state: its ``state_dict`` without TE's ``_extra_state``, so the resumed
    module starts a fresh FP8 state (thunder's ``ThunderModule.state_dict`` holds the parameters and buffers of the
    original module, whose linears have no FP8 state, and a new compilation starts its own)."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self.twin = te_twin(plain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.twin(x)

    def checkpoint(self) -> dict[str, Any]:
        return without_fp8_state(self.twin.state_dict())

    def state_module(self) -> torch.nn.Module:
        return self.twin


class StatePerCall(_Model):
    """Eager TE with an FP8 state per call of ``networks.SharedLinearMLP``'s shared linear: its second call through a
    ``te.Linear`` of its own on the same parameters (``networks.SECOND_CALL``), as each TE linear of thunder's trace
    keeps its own state where eager TE's module keeps one for both calls."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self.twin = te_twin(plain)
        second = te_linear(plain.shared)
        second.weight = self.twin.shared.weight
        self.twin.add_module(SECOND_CALL, second)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.twin(x)

    def state_module(self) -> torch.nn.Module:
        return self.twin


class InputGradAsWeightGrad:
    """In a micro-batch without the gradient reduction, each linear whose input requires grad accumulates that input's
    gradient where its weight's belongs: thunder's FSDP no-sync stash (``stash_unsharded_grads_and_return_none_as_grads``,
    before 0.2.4.dev20250608) stashes the first output of the symbol that produced each weight's gradient, and the
    functional executor's is its backward FP8 update, whose outputs are (input grad, weight grad). Hooks on a module's
    linears: ``choose`` before each forward says whether the micro-batch reduces."""

    def __init__(self, module: torch.nn.Module) -> None:
        self._unsynced = False
        self._weight_hooks: list[Any] = []
        for linear in module.modules():
            if hasattr(linear, "in_features"):
                linear.register_forward_hook(self._stash_input_grad)

    def choose(self, synced: bool) -> None:
        for hook in self._weight_hooks:
            hook.remove()
        self._weight_hooks, self._unsynced = [], not synced

    def _stash_input_grad(self, linear: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        x, weight = args[0], linear.weight
        if not (self._unsynced and x.requires_grad):
            return
        self._weight_hooks.append(weight.register_hook(torch.zeros_like))  # the weight's own gradient: dropped

        def accumulate(grad: torch.Tensor) -> None:
            with torch.no_grad():
                weight.grad = grad.detach().clone() if weight.grad is None else weight.grad + grad

        x.register_hook(accumulate)


class Bf16Copies(_Model):
    """fp32 parameters that train, and TE quantizing bfloat16 copies of them and of the input: thunder's autocast
    casts a linear's input, weight and bias to bfloat16 before TE takes it, where eager TE quantizes the fp32
    tensors. Each copy's gradient reaches its fp32 parameter as thunder's cast backward sends it (in fp32)."""

    def __init__(self, plain: torch.nn.Module) -> None:
        super().__init__()
        self.master = plain
        self.copies = te_twin(copy.deepcopy(plain).to(torch.bfloat16))
        for name, copied in self.copies.named_parameters():
            copied.register_post_accumulate_grad_hook(functools.partial(_into_master, plain.get_parameter(name)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            for name, copied in self.copies.named_parameters():
                copied.copy_(self.master.get_parameter(name))
        return self.copies(x.to(torch.bfloat16))

    def trained(self) -> torch.nn.Module:
        return self.master

    def state_module(self) -> torch.nn.Module:
        return self.copies


def _into_master(master: torch.nn.Parameter, copied: torch.nn.Parameter) -> None:
    grad = copied.grad.float()
    master.grad = grad if master.grad is None else master.grad + grad
    copied.grad = None


class RecomputedUnderFp8(_Model):
    """The ``te.Linear`` twin with the linears that thunder's checkpointing recomputes (the region's first
    ``recomputed``) under ``torch.utils.checkpoint``, recomputed in the backward under FP8 autocast: each records its
    amaxes again after the step's forward update and quantizes with the state as it then is, and no forward update
    follows (thunder's backward program runs in fp8_autocast with grad disabled, so its exit updates nothing).

    Where every region linear is recomputed, so are the region's GELUs, in one of thunder's ``GELU_REMAT`` forms (see
    ``GeluKeepingForwardTerms``): ``"last-keeps-forward"`` (thunder.jit from 0.2.5.dev20250706: the region's last GELU
    keeps part of its backward from the forward), ``"recomputed"`` (thunderfx from that build: all of it recomputed),
    ``"all-keep-forward"`` (both before it: every region GELU keeps its forward terms, and is recomputed as the
    recomputed input times the forward's cdf)."""

    def __init__(self, plain: torch.nn.Module, recomputed: int, group: Any, *, gelus: GeluRemat) -> None:
        super().__init__()
        self.twin = te_twin(plain)
        layers = list(self.twin)
        linear_at = [i for i, layer in enumerate(layers) if hasattr(layer, "in_features")]
        region_linears = linear_at[:-1]
        recomputed = min(recomputed, len(region_linears))
        end = len(layers) - 1 if recomputed == len(region_linears) else (region_linears[recomputed - 1] + 1 if recomputed else 0)
        if end == len(layers) - 1:
            gelu_at = [i for i in range(end) if isinstance(layers[i], torch.nn.GELU)]
            kept = {"last-keeps-forward": [i for i in gelu_at if i == end - 1], "recomputed": [], "all-keep-forward": gelu_at}[gelus]
            for i in kept:
                layers[i] = GeluKeepingForwardTerms(recomputed_by_forward_cdf=gelus == "all-keep-forward")
        self._gelus = [layer for layer in layers[:end] if isinstance(layer, GeluKeepingForwardTerms)]
        self._checkpointed, self._rest = layers[:end], layers[end:]
        self._group, self._recipe = group, None

    def choose(self, recipe: Any, synced: bool) -> None:
        self._recipe = recipe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.utils.checkpoint

        def head(x: torch.Tensor) -> torch.Tensor:
            for layer in self._checkpointed:
                x = layer(x)
            return x

        x = torch.utils.checkpoint.checkpoint(head, x, use_reentrant=False, context_fn=self._contexts)
        for layer in self._rest:
            x = layer(x)
        return x

    def _contexts(self) -> tuple[Any, Any]:
        return contextlib.nullcontext(), self._recomputing()

    @contextlib.contextmanager
    def _recomputing(self) -> Iterator[None]:
        with without_forward_update(te_autocast(self._recipe, self._group)):
            for gelu in self._gelus:
                gelu.recomputing = True
            try:
                yield
            finally:
                for gelu in self._gelus:
                    gelu.recomputing = False

    def state_module(self) -> torch.nn.Module:
        return self.twin


class _GeluKeepingForwardTerms(torch.autograd.Function):
    """GELU whose backward is thunder's for a rematerialized GELU: ``g * (Phi(z_f) + z_r * phi(z_f))``, with
    ``Phi`` and ``phi`` of the forward's input ``z_f`` (saved by the forward trace) and ``z`` of the input recomputed in
    the backward ``z_r`` (docs/results/h200-te2.9.0-b23f62b/jit-checkpointing/diag-traces.txt: t153, t176, bw_t74).
    Under non-reentrant checkpointing the saved tensor is the recomputed input; the attribute keeps the forward's.
    With ``forward_input`` given (a recomputation), the output is ``x * Phi(forward_input)``, as thunder before
    0.2.5.dev20250706 recomputes it."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, forward_input: torch.Tensor | None) -> torch.Tensor:
        ctx.forward_input = x.detach()
        ctx.save_for_backward(x)
        return torch.nn.functional.gelu(x) if forward_input is None else torch.mul(x, _thunder_gelu_cdf(forward_input))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (recomputed,) = ctx.saved_tensors
        scaled = ctx.forward_input / math.sqrt(2)
        density = (2 / math.sqrt(math.pi)) * torch.exp(-scaled.pow(2))
        return _thunder_gelu_cdf(ctx.forward_input) * grad + density * (0.5 * (recomputed * grad)) / math.sqrt(2), None


def _thunder_gelu_cdf(a: torch.Tensor) -> torch.Tensor:
    """``Phi(a)`` in the primitives of thunder's gelu decomposition (``thunder.torch.gelu``), in its order."""
    return torch.add(0.5, torch.mul(0.5, torch.erf(torch.true_divide(a, 1.4142135623730951))))


class GeluKeepingForwardTerms(torch.nn.Module):
    """``torch.nn.GELU`` with thunder's rematerialized backward (``_GeluKeepingForwardTerms``). With
    ``recomputed_by_forward_cdf``, its recomputation (``recomputing``, set by ``RecomputedUnderFp8``) returns the
    recomputed input times the forward's cdf: thunder before 0.2.5.dev20250706 saves ``Phi(z_f)`` and recomputes
    ``z_r * Phi(z_f)`` (read on the CPU in the backward traces of 0.2.4 .. 0.2.5.dev20250629, jit and thunderfx)."""

    def __init__(self, recomputed_by_forward_cdf: bool = False) -> None:
        super().__init__()
        self.recomputed_by_forward_cdf = recomputed_by_forward_cdf
        self.recomputing = False
        self._forward_input: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.recomputing:
            self._forward_input = x.detach()
            return _GeluKeepingForwardTerms.apply(x, None)
        kept = self._forward_input if self.recomputed_by_forward_cdf else None
        return _GeluKeepingForwardTerms.apply(x, kept)


@contextlib.contextmanager
def without_forward_update(autocast: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    """TE's FP8 ``autocast`` whose exit does not reduce and update the forward FP8 state (the backward's update runs)."""
    from unittest import mock

    from transformer_engine.pytorch.fp8 import FP8GlobalStateManager

    update = FP8GlobalStateManager.reduce_and_update_fp8_tensors

    def backward_only(forward: bool = True, *args: Any, **kwargs: Any) -> Any:
        return None if forward else update(forward, *args, **kwargs)

    with mock.patch.object(FP8GlobalStateManager, "reduce_and_update_fp8_tensors", backward_only), autocast:
        yield


class _ThunderSilu(torch.autograd.Function):
    """SiLU as thunder computes it before it had a gradient rule for it (``since.SILU_GRAD_RULE_SINCE``): ``a *
    reciprocal(1 + exp(-a))``, differentiated through those primitives, in the order of thunder 0.2.5's backward trace
    (bitwise equal to thunder's on the CPU; torch's fused silu kernels differ by a few ulps, which FP8 quantization
    can turn into a whole E4M3 step)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
        e = torch.exp(torch.neg(a))
        s = torch.reciprocal(torch.add(e, 1.0))
        ctx.save_for_backward(a, s, e)
        return torch.mul(a, s)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        a, s, e = ctx.saved_tensors
        return torch.mul(s, g) + torch.neg(torch.mul(torch.mul(torch.mul(torch.neg(torch.mul(a, g)), s), s), e))


def thunder_silu(a: torch.Tensor) -> torch.Tensor:
    return _ThunderSilu.apply(a)


def _thunders_activations(plain: torch.nn.Module) -> None:
    """A model does thunder's arithmetic where thunder's own decomposition is known to differ from torch's kernel: the
    llama block's SiLU on builds without its gradient rule."""
    from teparity.stack import since

    if hasattr(plain, "silu") and not since.installed_thunder_reached(since.SILU_GRAD_RULE_SINCE):
        plain.silu = thunder_silu


GeluRemat = Literal["last-keeps-forward", "recomputed", "all-keep-forward"]


def gelu_remat(compile_path: str) -> GeluRemat:
    """How the installed thunder recomputes a checkpointed region's GELUs (``RecomputedUnderFp8``)."""
    from teparity.stack import since

    if not since.installed_thunder_reached(since.GELU_RECOMPUTED_SINCE):
        return "all-keep-forward"
    return "last-keeps-forward" if compile_path == "jit" else "recomputed"


@dataclasses.dataclass(frozen=True)
class Build:
    """What a model's builder may read beside the plain network: thunder's executor and compile path, the regions
    thunder recomputes, the rank's fp8 group."""

    executor: str
    compile_path: str = "jit"
    recomputed: int = 0
    group: Any = None


#: Each eager model by its name (``teparity.records.EAGER_MODELS``): a builder of the plain network.
MODELS: dict[str, Callable[[torch.nn.Module, Build], _Model]] = {
    TORCH_LINEARS: lambda plain, build: TorchLinears(plain),
    STATE_PER_CACHE_ENTRY: lambda plain, build: StatePerCacheEntry(plain, own_updates=build.executor == "functional"),
    FRESH_STATE_PER_RECIPE_OBJECT: lambda plain, build: FreshStatePerRecipeObject(plain),
    BF16_COPIES: lambda plain, build: Bf16Copies(plain),
    RECOMPUTED_UNDER_FP8: lambda plain, build: RecomputedUnderFp8(plain, build.recomputed, build.group,
                                                                  gelus=gelu_remat(build.compile_path)),
    RESUMED_WITHOUT_FP8_STATE: lambda plain, build: ResumedWithoutFp8State(plain),
    STATE_PER_CALL: lambda plain, build: StatePerCall(plain),
    STATE_REJOINS_UPDATE: lambda plain, build: StateRejoinsUpdateAfterTypeChange(plain),
}


def eager_model(name: str, plain: torch.nn.Module, *, executor: str, compile_path: str = "jit", recomputed: int = 0,
                group: Any = None) -> _Model:
    """The eager model ``name`` (``MODELS``) of ``plain``, for thunder with ``executor`` compiled by ``compile_path``,
    with thunder's activations where they differ from torch's (``_thunders_activations``)."""
    if name not in MODELS:
        raise ValueError(f"no eager model named {name!r}: one of {sorted(MODELS)}")
    _thunders_activations(plain)
    return MODELS[name](plain, Build(executor, compile_path, recomputed, group))
