"""thunder's API as each build spells it: the options that put a TE executor first, and DDP and FSDP around
``thunder.jit`` in the order the build supports. Imports thunder only when called (in ranks)."""

from __future__ import annotations

from typing import Any

from teparity.stack.executors import ExecutorInfo, executor_module
from teparity.stack.since import DDP_OF_JITTED_SINCE, reached
from teparity.stack.versions import build_version


def jit_options(info: ExecutorInfo, fp8_recipe: Any | None = None) -> dict[str, Any]:
    """``thunder.jit`` keyword arguments that put this TE executor first (docs/facts.md, "Enable")."""
    import thunder

    module = executor_module(info)
    executor = getattr(module, info.attribute)
    if executor is None:
        raise LookupError(f"{info.module}.{info.attribute} is None: TransformerEngine is not importable")
    options: dict[str, Any] = {"executors": [executor, *thunder.get_default_executors()]}
    if info.kind == "functional":
        options["transforms"] = [getattr(module, info.transform)()]
    elif fp8_recipe is not None:
        options["te_fp8_recipe"] = fp8_recipe  # a misspelled key would be ignored silently
    return options


def jit_ddp(network: Any, jit_kwargs: dict[str, Any], **ddp_kwargs: Any) -> Any:
    """``thunder.distributed.ddp`` + ``thunder.jit`` in the order this thunder supports; ``ddp_kwargs``
    go to ``ddp`` (``bucket_size_in_mb``).

    ``broadcast_from=None``: the ranks build identical seeded weights, and broadcasting a CUDA leaf
    parameter fails under gloo (docs/facts.md).
    """
    import thunder
    import thunder.distributed

    if not reached(build_version("lightning-thunder"), DDP_OF_JITTED_SINCE):
        return thunder.jit(thunder.distributed.ddp(network, broadcast_from=None, **ddp_kwargs), **jit_kwargs)
    return thunder.distributed.ddp(thunder.jit(network, **jit_kwargs), broadcast_from=None, **ddp_kwargs)


#: thunder's and FSDP2's sharding by name, the one list: ``thunder.distributed.fsdp``'s ``FSDPType`` members
#: (``sharding_strategy``, the same names in every build from 0.2.0.dev20240404 to 0.2.7.dev20260201: docs/facts.md,
#: "thunder's FSDP"). ZERO2 keeps the gathered parameters from the forward to the backward (FSDP2's
#: ``reshard_after_forward=False``), ZERO3 gathers them again.
FSDP_SHARDING = ("ZERO2", "ZERO3")


def jit_fsdp(network: Any, jit_kwargs: dict[str, Any], strategy: str, device: str, bucketing: str | None = None) -> Any:
    """``thunder.distributed.fsdp`` (``strategy``: ``"ZERO2"`` or ``"ZERO3"``; ``bucketing``: ``"NONE"``,
    ``"LAYER"``, ``"BLOCK"`` or None for fsdp's default, NONE) + ``thunder.jit``, in the order this thunder
    supports (as ``jit_ddp``); the shards live on ``device`` (fsdp's default is the rank's GPU, which a CPU
    runner has none of). ``broadcast_from=None``: identical seeded weights on every rank."""
    import thunder
    import thunder.distributed
    import torch

    options = {"sharding_strategy": thunder.distributed.FSDPType[strategy], "broadcast_from": None,
               "device": torch.device(device)}
    if bucketing is not None:
        options["bucketing_strategy"] = thunder.distributed.FSDPBucketingStrategy[bucketing]
    if not reached(build_version("lightning-thunder"), DDP_OF_JITTED_SINCE):
        return thunder.jit(thunder.distributed.fsdp(network, **options), **jit_kwargs)
    return thunder.distributed.fsdp(thunder.jit(network, **jit_kwargs), **options)
