"""Inside a rank: thunderfx (``thunder.dynamo.thunderfx``: torch.compile with thunder as its backend, thunder's default
executors, no TE) or eager torch, on the CPU, fp32, on one rank or under torch DDP (gloo): the trace tier's
``thunderfx-matches-torch``. The FP8 tiers' thunderfx rows hold thunderfx + TE to eager TE; this check holds thunderfx
itself, so that a thunderfx regression (a torch it cannot run, a recompile at every step) is named as one on every
runner.

Each side returns per step the output, the input gradient and the parameter gradients (DDP's: all-reduced) as
``records.DdpTransformRun``; the thunder side also how many thunder programs thunderfx made of the network and how many
compilations they had after each step (one program, compiled once: a compile per step is a program whose state starts
over, an FP8 state among it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity.inrank.scenarios import transform_steps
from teparity.records import DdpTransformRun, RankError
from teparity.strategies import STRATEGIES, Strategy

#: The strategies the check runs (``ThunderfxSpec.strategy``): thunderfx of the module on one rank, and of torch DDP
#: around it (thunder's benchmark_litgpt ``ddp`` mode with a Dynamo backend).
THUNDERFX_STRATEGIES = ("one-rank", "thunderfx-ddp")


@dataclasses.dataclass(frozen=True)
class ThunderfxSpec:
    """thunderfx (``side="thunder"``) or eager torch (``side="torch"``) of ``plain_mlp`` on the CPU, fp32."""

    side: str = "thunder"
    #: One of ``THUNDERFX_STRATEGIES``: its ranks come from there (``teparity.gate.ranks.StrategyRanks``).
    strategy: str = "one-rank"
    steps: int = 3
    batch: int = 16
    sizes: tuple[int, ...] = (32, 64, 16)
    activation: str | None = "gelu"
    input_requires_grad: bool = True
    lr: float = 0.05

    def __post_init__(self) -> None:
        if self.strategy not in THUNDERFX_STRATEGIES:
            raise ValueError(f"the thunderfx check runs one of {THUNDERFX_STRATEGIES}, not {self.strategy!r}")

    @property
    def parallel(self) -> Strategy:
        return STRATEGIES[self.strategy]


def thunderfx_run(rank: int, world_size: int, spec: ThunderfxSpec) -> DdpTransformRun:
    """``spec.steps`` SGD steps with rank-dependent inputs. The thunder side returns what it raised instead of raising
    (thunderfx compiles at the first call, on every rank alike, before any gradient collective)."""
    import torch

    from teparity.inrank.networks import Whole, plain_mlp

    network = plain_mlp(spec.sizes, seed=0, activation=spec.activation)
    parameters = dict(network.named_parameters())
    ddp = spec.strategy == "thunderfx-ddp"
    wrapped = torch.nn.parallel.DistributedDataParallel(Whole(network) if spec.side == "thunder" else network) if ddp \
        else network
    if spec.side == "torch":
        return transform_steps(rank, spec, wrapped, parameters, seeds=(6, 7))
    compiles: list[int | None] = []
    try:
        from thunder.dynamo import thunderfx

        torch._dynamo.reset()  # a program of its own, as the FP8 tiers' thunderfx sides
        compiled = thunderfx(wrapped)
        run = transform_steps(rank, spec, compiled, parameters, seeds=(6, 7), after_step=lambda: compiles.append(_compiles(compiled)))
    except Exception as error:
        return DdpTransformRun(error=RankError.of(error))
    return dataclasses.replace(run, programs=len(compiled.last_traces), compiles_by_step=tuple(compiles))


def _compiles(compiled: Any) -> int | None:
    """The thunder compilations (cache misses) of every program thunderfx made so far, or None where this build's
    compiled object does not say (no ``_backend.subgraph_infos``)."""
    import thunder

    infos = getattr(getattr(compiled, "_backend", None), "subgraph_infos", None)
    if infos is None:
        return None
    return sum(thunder.cache_misses(fn) for info in infos for fn in getattr(info, "thunder_compiled_fns", ()))
