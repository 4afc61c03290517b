"""How the ranks of a data-parallel side accumulate and reduce gradients over micro-batches: thunder's no-sync context
(and, on gloo, its reduction one collective at a time), the stash of thunder's FSDP, and the eager side's accumulation
done the way thunder does it (``ThunderStyleAccumulation``), so that both sides sum in one order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from teparity.records import NOTHING_STASHED


def thunder_no_sync(compiled: Any) -> Callable[[], Any]:
    """thunder's gradient accumulation context of a data-parallel module: ``ThunderModule.no_sync``, which skips the
    gradient reduction inside and reduces what accumulated there when it ends (``thunder.distributed``'s bare
    ``skip_data_parallel_grad_sync`` leaves those gradients unreduced: a training loop uses ``no_sync``). Its
    reduction batches collectives (``_coalescing_manager``), which gloo does not run on CUDA tensors
    (``ProcessGroupGloo::allreduce_coalesced: unsupported device type cuda``): on gloo the same collectives run one
    by one (``_sync_grads_one_by_one``)."""
    import torch.distributed as dist

    if not hasattr(compiled, "no_sync"):
        raise TypeError(f"{type(compiled).__name__} has no no_sync: not a thunder data-parallel module")

    @contextlib.contextmanager
    def no_sync() -> Any:
        import thunder.distributed

        if dist.get_backend() != "gloo":
            with compiled.no_sync():
                yield
                _stashed(compiled)  # thunder's own reduction returns early, silently, where nothing was stashed
            return
        with thunder.distributed.skip_data_parallel_grad_sync():
            yield
        _sync_grads_one_by_one(compiled)

    return no_sync


def _stashed(module: Any) -> list[tuple[str, Any]]:
    """Under thunder's FSDP: each parameter's stashed unsharded gradient, by name, where ``_sync_grads`` looks for it
    (the original module's parameters); raises ``NOTHING_STASHED`` where there is none. [] under DDP."""
    if not getattr(module, "use_fsdp", False):
        return []
    found = [(name, unsharded) for name, _ in module.named_parameters()
             if (unsharded := getattr(module._model.get_parameter(name), "_thunder_fsdp_unsharded_grad", None)) is not None]
    if not found:
        raise AssertionError(NOTHING_STASHED)
    return found


def average_over_ranks(grads: list[Any]) -> None:
    """What thunder's DDP ``_sync_grads`` does to accumulated gradients, in place: divide by the world size, then
    all-reduce (sum), one collective per tensor."""
    import torch
    import torch.distributed as dist

    torch._foreach_div_(grads, dist.get_world_size())
    for grad in grads:
        dist.all_reduce(grad)


def _sync_grads_one_by_one(module: Any) -> None:
    """What ``thunder.distributed._sync_grads`` does on leaving ``no_sync``, each collective on its own: DDP averages
    every accumulated gradient over the ranks; FSDP reduce-scatters (averaging) each parameter's stashed unsharded
    gradient into its shard's ``grad``."""
    import torch.distributed as dist

    world = dist.get_world_size()
    if getattr(module, "use_ddp", False):
        average_over_ranks([p.grad for p in module.parameters() if p.grad is not None])
        return
    if not getattr(module, "use_fsdp", False):
        raise TypeError(f"{type(module).__name__} is neither thunder's DDP nor its FSDP (no use_ddp, no use_fsdp)")
    rank = dist.get_rank()
    for name, unsharded in _stashed(module):
        shard = unsharded.narrow(0, rank * (unsharded.size(0) // world), unsharded.size(0) // world).clone()
        dist.reduce_scatter_tensor(shard, unsharded.div(world))
        module.get_parameter(name).grad = shard
        del module._model.get_parameter(name)._thunder_fsdp_unsharded_grad


class ThunderStyleAccumulation:
    """Gradient accumulation on the eager side as thunder documents its own (``ThunderModule.no_sync``): the
    micro-batches inside the span accumulate unreduced (torch DDP's ``no_sync``); leaving it, what accumulated is
    averaged over the ranks; the last micro-batch's gradients are averaged alone and added to it. torch DDP averages
    the whole sum at once instead, which rounds apart, and FP8 turns a rounding difference into a quantization step:
    the same summation keeps the sides exact. ``span()`` is the no-sync context; ``finish()`` runs after the last
    backward."""

    def __init__(self, ddp: Any, parameters: dict[str, Any]) -> None:
        self.ddp, self.parameters, self.accumulated = ddp, parameters, {}

    @contextlib.contextmanager
    def span(self) -> Any:
        with self.ddp.no_sync():
            yield
        average_over_ranks([p.grad for p in self.parameters.values() if p.grad is not None])
        # Out of DDP's sight: its reducer would average them again with the last micro-batch's.
        self.accumulated = {name: p.grad for name, p in self.parameters.items() if p.grad is not None}
        for name in self.accumulated:
            self.parameters[name].grad = None

    def finish(self) -> None:
        for name, grad in self.accumulated.items():
            parameter = self.parameters[name]
            parameter.grad = grad if parameter.grad is None else parameter.grad + grad
        self.accumulated = {}
