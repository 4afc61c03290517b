"""Code that runs inside a rank: build thunder + TE, run steps, return the evidence as plain data.

Every function here has the ``run_ranks`` signature ``fn(rank, world_size, spec)`` and returns
picklable plain data; the parent process judges (no asserts in ranks: an assert on one rank while
another waits in a collective is a hang).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

from teparity.inrank.syncspy import record_fp8_syncs
from teparity.records import DdpTransformRun, RankError
from teparity.stack.executors import ExecutorKind, executor_module, find_te_executors
from teparity.stack.thunder_api import jit_ddp, jit_fsdp, jit_options
from teparity.strategies import STRATEGIES, Strategy
from teparity.trace_summary import TraceSummary, is_distributed, summarize

if TYPE_CHECKING:
    from teparity.records import PairSpec


#: The strategies a legacy-sync scenario runs (``LegacySyncSpec.strategy``): thunder.jit on one rank, thunder's DDP and
#: its FSDP.
LEGACY_SYNC_STRATEGIES = ("one-rank", "thunder-ddp", "thunder-fsdp")


@dataclasses.dataclass(frozen=True)
class LegacySyncSpec:
    steps: int = 3
    device: str = "cpu"
    #: One of ``LEGACY_SYNC_STRATEGIES``: its ranks come from there (``teparity.gate.ranks.StrategyRanks``).
    strategy: str = "one-rank"
    #: thunder FSDP's sharding, ``"ZERO2"`` or ``"ZERO3"``; None for the others.
    sharding: str | None = None
    batch: int = 16
    sizes: tuple[int, ...] = (32, 64, 16)

    def __post_init__(self) -> None:
        if self.strategy not in LEGACY_SYNC_STRATEGIES:
            raise ValueError(f"a legacy-sync scenario runs one of {LEGACY_SYNC_STRATEGIES}, not {self.strategy!r}")
        if (self.sharding is not None) != (self.strategy == "thunder-fsdp"):
            raise ValueError(f"sharding {self.sharding!r} with strategy {self.strategy}: thunder fsdp alone takes one")

    @property
    def parallel(self) -> Strategy:
        return STRATEGIES[self.strategy]


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

    from teparity.inrank.networks import plain_mlp, seeded_input

    info = find_te_executors()["legacy"]
    network = plain_mlp(spec.sizes, seed=0, device=spec.device)
    if spec.strategy == "thunder-fsdp":
        jitted = jit_fsdp(network, jit_options(info), spec.sharding, spec.device)
    elif spec.strategy == "thunder-ddp":
        jitted = jit_ddp(network, jit_options(info))
    else:
        jitted = thunder.jit(network, **jit_options(info))
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
    from teparity.mutations import catalog as mutations

    if rank == world_size - 1:
        mutations.apply(["sync-missing"])
    run_thunder(rank, world_size, spec)
    dist.barrier()


@dataclasses.dataclass(frozen=True)
class DdpTransformSpec:
    """thunder's DDP transform (``side="thunder"``, with ``executor`` in the list, or thunder's default
    executors when None) or torch DDP (``side="torch"``) on the CPU, fp32."""

    side: str = "thunder"
    executor: ExecutorKind | None = "legacy"
    steps: int = 2
    batch: int = 16
    sizes: tuple[int, ...] = (32, 64, 16)
    activation: str | None = "gelu"
    input_requires_grad: bool = True
    #: ``ddp(bucket_size_in_mb=...)``; None is thunder's default (25).
    bucket_size_in_mb: float | None = None
    lr: float = 0.05

    @property
    def parallel(self) -> Strategy:
        """Both sides are data parallel: thunder's DDP, and torch DDP its reference."""
        return STRATEGIES["thunder-ddp"]


def ddp_transform_run(rank: int, world_size: int, spec: DdpTransformSpec) -> DdpTransformRun:
    """``spec.steps`` SGD steps of ``plain_mlp`` under thunder's DDP transform or torch DDP, with
    rank-dependent inputs. The thunder side returns its exception instead of raising: the 2024 transform
    raises at trace construction, on every rank alike, before any collective (docs/facts.md)."""
    import torch

    from teparity.inrank.networks import plain_mlp

    network = plain_mlp(spec.sizes, seed=0, activation=spec.activation)
    if spec.side == "torch":
        return transform_steps(rank, spec, torch.nn.parallel.DistributedDataParallel(network), dict(network.named_parameters()))
    info = find_te_executors()[spec.executor] if spec.executor else None
    options = jit_options(info) if info else {}
    bucket = {} if spec.bucket_size_in_mb is None else {"bucket_size_in_mb": spec.bucket_size_in_mb}
    jitted = jit_ddp(network, options, **bucket)
    parameters = {name: jitted.get_parameter(name) for name, _ in network.named_parameters()}
    syncs = record_fp8_syncs(executor_module(info)) if info else contextlib.nullcontext()
    try:
        with syncs:
            run = transform_steps(rank, spec, jitted, parameters)
    except Exception as error:
        return DdpTransformRun(error=RankError.of(error))
    return dataclasses.replace(run, backward_collectives=backward_collectives(jitted))


def backward_collectives(jitted: Any) -> tuple[str, ...]:
    """The distributed symbols of ``jitted``'s last backward execution trace, in order."""
    import thunder

    return tuple(b.sym.name for b in thunder.last_backward_traces(jitted)[-1].bound_symbols if is_distributed(b.sym.name))


def transform_steps(
    rank: int, spec: Any, network: Any, parameters: dict[str, Any], *, seeds: tuple[int, int] = (2, 3),
    full: Any = None, after_step: Any = None,
) -> DdpTransformRun:
    """``spec.steps`` SGD steps of a data-parallel ``network`` on the CPU, fp32, with rank-dependent inputs
    (``seeds``: the input's and the output gradient's test seeds): per step the output, the input gradient
    and the parameter gradients, each through ``full(name, grad)`` where the gradient is a shard (FSDP:
    gathered in sorted name order, the same collectives in the same order on every rank); ``after_step()`` after each."""
    import torch

    from teparity.inrank.networks import seeded_input

    optimizer = torch.optim.SGD(list(parameters.values()), lr=spec.lr)
    outputs, input_grads, param_grads = [], [], []
    for step in range(spec.steps):
        x = seeded_input((spec.batch, spec.sizes[0]), test_seed=seeds[0], step=step, rank=rank, device="cpu", dtype=torch.float32)
        x.requires_grad_(spec.input_requires_grad)
        y = network(x)
        y.backward(seeded_input(tuple(y.shape), test_seed=seeds[1], step=step, rank=rank, device="cpu", dtype=torch.float32))
        outputs.append(y.detach().clone())
        input_grads.append(None if x.grad is None else x.grad.detach().clone())
        grads = sorted(parameters.items()) if full else parameters.items()
        param_grads.append({name: (full(name, p.grad) if full else p.grad).detach().clone() for name, p in grads
                            if p.grad is not None})
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if after_step is not None:
            after_step()
    return DdpTransformRun(tuple(outputs), tuple(input_grads), tuple(param_grads))
