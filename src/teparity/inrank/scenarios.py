"""Code that runs inside a rank: build thunder + TE, run steps, return the evidence as plain data.

Every function here has the ``run_ranks`` signature ``fn(rank, world_size, spec)`` and returns
picklable plain data; the parent process judges (no asserts in ranks: an assert on one rank while
another waits in a collective is a hang).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from teparity.inrank.syncspy import record_fp8_syncs
from teparity.judge.traces import TraceSummary, summarize
from teparity.stack.versions import (
    executor_module,
    find_te_executors,
    jit_ddp,
    jit_options,
)

if TYPE_CHECKING:
    from teparity.records import PairSpec


@dataclasses.dataclass(frozen=True)
class LegacySyncSpec:
    steps: int = 3
    device: str = "cpu"
    ddp: bool = False
    batch: int = 16
    sizes: tuple[int, ...] = (32, 64, 16)


@dataclasses.dataclass(frozen=True)
class LegacySyncRun:
    forward: TraceSummary
    backward: TraceSummary
    #: Backward syncs that ran (``reduce_and_update_fp8_tensors(forward=False)``) in each step.
    backward_syncs_per_step: tuple[int, ...]
    recorder_mode: str
    #: Names of the symbols that hold the linears in the forward trace (to tell TE from a fallback).
    forward_linear_symbols: tuple[str, ...]


def legacy_sync_run(rank: int, world_size: int, spec: LegacySyncSpec) -> LegacySyncRun:
    """Train ``spec.steps`` steps with the legacy TE executor, counting backward syncs per step."""
    import thunder
    import torch

    from teparity.inrank.models import plain_mlp, seeded_input

    info = find_te_executors()["legacy"]
    model = plain_mlp(spec.sizes, seed=0, device=spec.device)
    jitted = jit_ddp(model, jit_options(info)) if spec.ddp else thunder.jit(model, **jit_options(info))
    per_step = []
    with record_fp8_syncs(executor_module(info)) as record:
        for step in range(spec.steps):
            before = record.backward_calls()
            x = seeded_input((spec.batch, spec.sizes[0]), test_seed=1, step=step, rank=rank, device=spec.device, dtype=torch.float32)
            jitted(x).sum().backward()
            if spec.device.startswith("cuda"):
                torch.cuda.synchronize()
            per_step.append(record.backward_calls() - before)
    forward = summarize(thunder.last_traces(jitted)[-1], f"rank {rank} forward trace")
    backward = summarize(thunder.last_backward_traces(jitted)[-1], f"rank {rank} backward trace")
    linears = tuple(row.name for row in forward.rows if "linear" in row.name)
    return LegacySyncRun(forward, backward, tuple(per_step), record.mode, linears)


def legacy_ddp_with_sync_skipped_on_last_rank(rank: int, world_size: int, spec: PairSpec) -> None:
    """A real mismatched collective: the last rank's backward has no FP8 sync (``sync-missing`` applied
    on that rank only), so its peers' ``reduce_and_update_fp8_tensors`` all-reduce finds no partner."""
    import torch.distributed as dist

    from teparity.inrank.sides import run_thunder
    from teparity.tools import mutations

    if rank == world_size - 1:
        mutations.apply(["sync-missing"])
    run_thunder(rank, world_size, spec)
    dist.barrier()
