"""Patches of thunder itself around the TE executors: its checkers, its autocast rule for linear, its DDP and
FSDP transforms."""

from __future__ import annotations

from typing import Any

from teparity.stack.executors import executor_module, find_te_executors


def linear_not_downcast_under_autocast() -> None:
    """thunder's autocast rule for linear stops downcasting: under ``torch.autocast`` the linear gets the fp32
    operands (on CPU, thunder 0.2.6, the grad transform then raises on a bfloat16 gradient for an fp32
    parameter)."""
    import thunder.transforms.autocast as autocast

    if getattr(autocast, "_linear_autocast_impl", None) is None:
        raise LookupError("cannot inject: this thunder's autocast has no _linear_autocast_impl")
    autocast._linear_autocast_impl = lambda a, w, bias, dtype: autocast.prims.linear(a, w, bias)


def decline_every_linear() -> None:
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


def ddp_gradient_not_reduced() -> None:
    """thunder's DDPTransform leaves the module's last parameter out of the replicated ones: it is not
    synchronized, so its gradient is never all-reduced (each rank keeps its own)."""
    from thunder.distributed.transforms import ddp_v2

    real = ddp_v2.DDPTransform.transform_module

    def transform_module(self: Any, network: Any) -> None:
        real(self, network)
        del self.replicated_params[list(self.replicated_params)[-1]]

    ddp_v2.DDPTransform.transform_module = transform_module


def fsdp_gradient_not_reduced() -> None:
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
