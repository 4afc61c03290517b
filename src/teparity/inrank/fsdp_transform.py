"""Inside a rank: thunder's FSDP transform (``thunder.distributed.fsdp``, thunder's default executors, no
TE) or torch's FSDP2 (``fully_shard``) on the CPU, fp32, with gloo: the trace tier's
``fsdp-transform-matches-torch-fsdp``.

ZeRO2 is ``fully_shard(reshard_after_forward=False)`` (torch's SHARD_GRAD_OP: parameters gathered for the
forward and kept unsharded through the backward), ZeRO3 ``reshard_after_forward=True`` (FULL_SHARD: freed
after the forward, gathered again in the backward). FSDP2 and thunder both shard every parameter on its
first dimension, so the shards are the same slices on both sides; FSDP1 (``FullyShardedDataParallel``)
flattens each wrapped module's parameters into one ``FlatParameter`` and shards that, so its local
gradients are slices of another layout (docs/facts.md, "thunder's FSDP").

Each side returns per step the output, the input gradient and the full parameter gradients (gathered
from the shards: FSDP2's ``DTensor.full_tensor()``, thunder's shards by ``all_gather_into_tensor`` over
the world, cut to the parameter's shape where thunder padded it) as ``records.DdpTransformRun``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity.inrank.scenarios import backward_collectives, transform_steps
from teparity.records import DdpTransformRun, RankError
from teparity.stack.thunder_api import FSDP_SHARDING, jit_fsdp
from teparity.strategies import STRATEGIES, Strategy


@dataclasses.dataclass(frozen=True)
class FsdpTransformSpec:
    """thunder's FSDP (``side="thunder"``) or torch's FSDP2 (``side="torch"``) on the CPU, fp32."""

    side: str = "thunder"
    #: ``"ZERO2"`` or ``"ZERO3"`` (``thunder_api.FSDP_SHARDING``).
    sharding: str = "ZERO2"
    #: thunder fsdp's ``bucketing_strategy`` by name, or None (its default, NONE); the torch side ignores it.
    bucketing: str | None = None
    steps: int = 2
    batch: int = 16
    sizes: tuple[int, ...] = (32, 64, 16)
    activation: str | None = "gelu"
    input_requires_grad: bool = True
    lr: float = 0.05

    @property
    def parallel(self) -> Strategy:
        """Both sides shard: thunder's FSDP, and torch FSDP2 its reference."""
        return STRATEGIES["thunder-fsdp"]


def gather_shard(shard: Any, shape: tuple[int, ...], group: Any = None) -> Any:
    """The full tensor of ``shape`` from every rank's dim-0 shard (thunder pads dim 0 to a multiple of the
    world size: the padding is cut off). A collective: every rank calls it, in the same order."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    local = shard.detach().contiguous()
    full = torch.empty((local.shape[0] * world, *local.shape[1:]), dtype=local.dtype, device=local.device)
    dist.all_gather_into_tensor(full, local, group=group)
    return full[: shape[0]].reshape(shape)


def fully_shard_network(network: Any, sharding: str, mesh: Any = None, keep_attributes: bool = False,
                        per_linear: bool = True) -> Any:
    """torch FSDP2 on every linear and then the root, as TE's own FSDP2 test does
    (tests/pytorch/distributed/run_fsdp2_model.py), or on the root alone (``per_linear`` False: one unit, as a one-block
    model under thunder's benchmark_litgpt ``fsdp2`` mode): ZERO2 -> ``reshard_after_forward=False``, ZERO3 ->
    True. ``keep_attributes``: put back the attributes TE sets on its parameters, which sharding drops."""
    import torch

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch before 2.6 (the mid-2024 thunder builds' torch 2.4) has FSDP2 only here
        from torch.distributed._composable.fsdp import fully_shard

    if sharding not in FSDP_SHARDING:
        raise ValueError(f"unknown sharding {sharding!r}: one of {FSDP_SHARDING}")
    reshard = sharding == "ZERO3"
    saved = {name: dict(vars(p)) for name, p in network.named_parameters()} if keep_attributes else {}
    options: dict[str, Any] = {"reshard_after_forward": reshard}
    if mesh is not None:
        options["mesh"] = mesh
    for layer in network if per_linear else ():
        if isinstance(layer, torch.nn.Linear) or hasattr(layer, "fp8_meta"):
            fully_shard(layer, **options)
    fully_shard(network, **options)
    for name, p in network.named_parameters():
        for attribute, value in saved.get(name, {}).items():
            setattr(p, attribute, value)
    return network


def fsdp_transform_run(rank: int, world_size: int, spec: FsdpTransformSpec) -> DdpTransformRun:
    """``spec.steps`` SGD steps of ``plain_mlp`` under thunder's FSDP or torch FSDP2 with rank-dependent
    inputs. The thunder side returns its exception instead of raising (an FSDP transform that cannot take
    the network raises at trace construction, on every rank alike, before any collective)."""

    from teparity.inrank.networks import plain_mlp

    network = plain_mlp(spec.sizes, seed=0, activation=spec.activation)
    shapes = {name: tuple(p.shape) for name, p in network.named_parameters()}
    if spec.side == "torch":
        # On the CPU even where a GPU is visible: FSDP2's default mesh is the accelerator's.
        from torch.distributed.device_mesh import init_device_mesh

        sharded = fully_shard_network(network, spec.sharding, mesh=init_device_mesh("cpu", (world_size,)))
        parameters = dict(sharded.named_parameters())
        return transform_steps(rank, spec, sharded, parameters, seeds=(4, 5), full=lambda name, grad: grad.full_tensor())
    try:
        jitted = jit_fsdp(network, {}, spec.sharding, "cpu", spec.bucketing)
        parameters = {name: jitted.get_parameter(name) for name in shapes}
        run = transform_steps(rank, spec, jitted, parameters, seeds=(4, 5), full=lambda name, grad: gather_shard(grad, shapes[name]))
    except Exception as error:
        return DdpTransformRun(error=RankError.of(error))
    return dataclasses.replace(run, backward_collectives=backward_collectives(jitted))
