"""thunder's FSDP (``thunder.distributed.fsdp`` of ``thunder.jit``, ``spec.sharding`` ZERO2 or ZERO3, ``spec.bucketing``)
against eager TE under the spec's reference (``spec.reference``):

- ``"fsdp2"``: torch FSDP2 (``fully_shard``) over the ``te.Linear`` twins, ``reshard_after_forward`` False for ZeRO2
  and True for ZeRO3. FSDP2 shards every parameter on dim 0, as thunder does, and is what TE's own FSDP test uses
  (tests/pytorch/distributed/run_fsdp2_model.py: ``fully_shard`` on every ``te.Linear``, then the root, keeping the
  attributes TE set on its parameters). The reference where every rank has a GPU of its own (NCCL).
- ``"ddp"``: torch DDP over the same twins. thunder's FSDP averages each gradient over the ranks and gathers the
  same full parameters as DDP keeps, so its gathered gradients and parameters must be DDP's, and its FP8 state (the
  amaxes all-reduced over the world) DDP's eager TE state. The reference where torch FSDP2 over ``te.Linear`` cannot
  run: gloo ranks sharing one GPU, where it dies of SIGSEGV (``teparity.stack.reasons.fsdp_backend_unfit``). It does
  not shard, so one run serves ZeRO2 and ZeRO3.

The parameter gradients are the full ones (FSDP2's ``DTensor.full_tensor()``; thunder's shards gathered by
``all_gather_into_tensor``, cut to the parameter's shape; DDP's are full), gathered in sorted name order (each gather is
a collective, in one order on every rank); the thunder side records its traces (the collectives and amax updates whose
order the fsdp tier compares across ranks). Micro-batches but the last skip the gradient reduction: thunder's
``skip_data_parallel_grad_sync``, DDP's ``no_sync``, FSDP2's ``set_requires_gradient_sync(False)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from teparity.inrank.fsdp_transform import fully_shard_network, gather_shard
from teparity.inrank.accumulation import thunder_no_sync
from teparity.inrank.program import Program, eager_module, eager_program, rank_device, thunder_network, thunder_options, thunder_program
from teparity.records import Case, PairSpec, Side
from teparity.stack.executors import ExecutorInfo
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_fsdp


def mesh() -> Any:
    """A 1-D mesh over the world's existing group (no new group), on the device the ranks use."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(dist.group.WORLD, "cuda")


def program(side: Side, plain: Any, spec: PairSpec, group: Any, case: Case, info: ExecutorInfo, recipe: Any) -> Program:
    if side == "eager":
        return sharded(eager_reference(eager_module(plain, spec, group, case), spec, group))
    return sharded(_thunder_fsdp(plain, spec, group, info, recipe))


def sharded(program: Program) -> Program:
    """A sharding strategy's side: its parameters sorted by name (each gradient's gather is a collective, in one order
    on every rank), only the last micro-batch's input requiring grad."""
    program.parameters = dict(sorted(program.parameters.items()))
    program.input_grad_last_only = True
    return program


def eager_reference(module: Any, spec: PairSpec, group: Any) -> Program:
    """The eager side: the ``te.Linear`` twins (or a defect model of them: ``teparity.inrank.program.eager_module``) under the spec's
    reference (module docstring): the network, the parameters it steps, how a gradient becomes full, and the context
    of a micro-batch whose gradient is not reduced."""
    if spec.parallel.sharded_reference(spec) == "ddp":
        return eager_program(module, spec, group, ddp=True)
    if spec.model is not None:
        raise NotImplementedError(f"the defect model {spec.model} under torch FSDP2: the fsdp tier models defects against "
                                  "its DDP reference only (gloo ranks sharing a GPU)")
    network = fully_shard_network(module, spec.sharding, mesh=mesh(), keep_attributes=True)
    fp8 = lambda recipe: te_autocast(recipe, group)  # noqa: E731
    return Program(network, dict(network.named_parameters()), fp8, fsdp2_no_sync(network), full=full_tensor, runs_eager=True)


def full_tensor(name: str, grad: Any) -> Any:
    """An FSDP2 gradient (a sharded ``DTensor``) made whole."""
    return grad.full_tensor()


def fsdp2_no_sync(network: Any) -> Callable[[], Any]:
    """FSDP2's context of a micro-batch whose gradient is not reduced."""

    @contextlib.contextmanager
    def no_sync() -> Iterator[None]:
        network.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            network.set_requires_gradient_sync(True)

    return no_sync


def _thunder_fsdp(plain: Any, spec: PairSpec, group: Any, info: ExecutorInfo, recipe: Any) -> Program:
    """The thunder side: thunder's FSDP of the jitted network (under activation checkpointing where the spec asks), its
    shards gathered to full gradients."""
    shapes = {name: tuple(p.shape) for name, p in plain.named_parameters()}
    compiled = jit_fsdp(thunder_network(plain, spec), thunder_options(spec, info, recipe), spec.sharding, rank_device(),
                        spec.bucketing)
    return thunder_program(compiled, plain, spec, group, no_sync=thunder_no_sync(compiled),
                           full=lambda name, grad: gather_shard(grad, shapes[name]))
