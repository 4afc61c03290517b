"""The two sides of an FSDP parity pair, inside a rank: ``run_eager_fsdp`` (eager TE, ``te.Linear`` twins
under torch FSDP2 ``fully_shard``) and ``run_thunder_fsdp`` (thunder + the spec's TE executor under
``thunder.distributed.fsdp``), for ``spec.fsdp`` "ZERO2" or "ZERO3".

They return ``list[CaseRun]`` as ``sides.run_eager`` / ``run_thunder`` do, so that ``judge.parity``
judges them unchanged; the parameter gradients are the full ones, gathered from the shards on every
rank (FSDP2's ``DTensor.full_tensor()``; thunder's shards by ``all_gather_into_tensor``, cut to the
parameter's shape), and the thunder side records its traces (the collectives and amax updates whose
order the fsdp tier compares across ranks).

Why FSDP2 and not FSDP1 (``FullyShardedDataParallel``): FSDP2 shards every parameter on dim 0, as
thunder does, and its ``reshard_after_forward`` is the ZeRO2 (False: SHARD_GRAD_OP) / ZeRO3 (True:
FULL_SHARD) distinction; FSDP1 shards flattened ``FlatParameter``s, and FSDP2 is what TE's own FSDP test
uses (tests/pytorch/distributed/run_fsdp2_model.py: ``fully_shard`` on every ``te.Linear``, then the root,
keeping the attributes TE set on its parameters). Bucketing (``spec.fsdp_bucketing``) is thunder's alone:
it changes how thunder packs its collectives, not the arithmetic, so one eager run serves every bucketing.
"""

from __future__ import annotations

import contextlib
from typing import Any

from teparity.inrank import fp8state, sides
from teparity.inrank.fsdp_transform import fully_shard_model, gather_shard
from teparity.inrank.sides import (
    _device,
    _grad_output,
    _input,
    _model,
    _thunder_snapshot,
    te_scale_update,
)
from teparity.inrank.syncspy import record_fp8_syncs
from teparity.records import CaseRun, PairSpec, ScaleUpdate, Side, StepRecord
from teparity.stack import recipes
from teparity.stack.executors import find_te_executors
from teparity.stack.te_api import te_autocast
from teparity.stack.thunder_api import jit_fsdp, jit_options


def run_eager_fsdp(rank: int, world_size: int, spec: PairSpec, scale_update: ScaleUpdate = "fused") -> list[CaseRun]:
    """Eager TE under torch FSDP2 on this rank, on TE's ``scale_update`` path."""
    with te_scale_update(scale_update):
        return _run_side("eager", rank, world_size, spec)


def run_thunder_fsdp(rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    """thunder fsdp + ``spec.executor`` on this rank."""
    return _run_side("thunder", rank, world_size, spec)


def _run_side(side: Side, rank: int, world_size: int, spec: PairSpec) -> list[CaseRun]:
    if spec.fsdp not in ("ZERO2", "ZERO3"):
        raise ValueError(f"an FSDP side needs spec.fsdp ZERO2 or ZERO3, not {spec.fsdp!r}")
    return sides._run_side(side, rank, world_size, spec, _run_case)


def _mesh() -> Any:
    """A 1-D mesh over the world's existing group (no new group), on the device the ranks use."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(dist.group.WORLD, "cuda")


def _run_case(side: Side, spec: PairSpec, run: CaseRun, rank: int, group: Any) -> None:
    import torch

    from teparity.inrank.models import linear_names, te_twin

    case = run.case
    device = _device()
    recipe = recipes.build(spec.recipe_id)
    plain = _model(case, device)
    run.linear_names = linear_names(plain)
    shapes = {name: tuple(p.shape) for name, p in plain.named_parameters()}
    info = find_te_executors()[spec.executor]
    if side == "eager":
        model: Any = fully_shard_model(te_twin(plain), spec.fsdp, mesh=_mesh(), keep_attributes=True)
        parameters = dict(model.named_parameters())
        full = lambda name, grad: grad.full_tensor()  # noqa: E731
        autocast = lambda: te_autocast(recipe, group)  # noqa: E731
    else:
        model = jit_fsdp(plain, jit_options(info, recipe), spec.fsdp, device, spec.fsdp_bucketing)
        parameters = {name: model.get_parameter(name) for name in shapes}
        full = lambda name, grad: gather_shard(grad, shapes[name])  # noqa: E731
        # As in sides: the legacy executor wraps its forward in fp8_autocast itself.
        autocast = (lambda: contextlib.nullcontext()) if spec.executor == "legacy" else (lambda: te_autocast(recipe, group))

    optimizer = torch.optim.SGD(list(parameters.values()), lr=spec.lr)
    with record_fp8_syncs(None) as syncs:
        for step in range(spec.steps):
            before = syncs.backward_calls()
            outputs, input_grads = [], []
            for micro in range(spec.micro_batches):
                x = _input(case, step=step, micro=micro, rank=rank, device=device, requires_grad=True)
                with autocast():
                    y = model(x)
                y.backward(_grad_output(case, step=step, micro=micro, rank=rank, device=device))
                outputs.append(y.detach().float().cpu())
                input_grads.append(None if x.grad is None else x.grad.detach().float().cpu())
            torch.cuda.synchronize()
            # Sorted: each gather is a collective, in the same order on every rank.
            grads = {n: full(n, p.grad).detach().float().cpu().clone() for n, p in sorted(parameters.items())
                     if p.grad is not None}
            state = fp8state.eager_snapshot(model) if side == "eager" else _thunder_snapshot(run, model, rank, info, recipe, spec)
            run.steps.append(StepRecord(outputs, input_grads, grads, state, syncs.backward_calls() - before))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    run.sync_mode = syncs.mode
