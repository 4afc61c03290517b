"""What one side of a parity run is asked to do, and what it returns: plain data.

The judges (``compare``, ``paritychecks``) read these without importing the rank code in ``parity``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from teparity import fp8state
from teparity.traces import TraceSummary
from teparity.versions import ExecutorKind

Side = Literal["eager", "thunder"]
#: How TE updates delayed-scaling amax histories and scales: "fused" is TE's default (one CUDA kernel
#: for all tensors), "python" is TE's ``_amax_and_scale_update`` (``NVTE_UNFUSED_FP8_UPDATE=1``, read
#: by TE at every update), the path thunder's functional executor always takes.
ScaleUpdate = Literal["fused", "python"]


@dataclasses.dataclass(frozen=True)
class Case:
    """A model and input shape. Feature sizes and the flattened leading size are multiples of 16."""

    sizes: tuple[int, ...] = (32, 64, 16)
    bias: bool = True
    #: Input shape without the feature dimension: (16,) is a 2-D input, (2, 8) a 3-D one.
    lead_shape: tuple[int, ...] = (16,)
    dtype: str = "float32"
    seed: int = 0
    #: "gelu" between linears, or None (linears only: every tensor TE sees is then bitwise equal on
    #: both sides, so the FP8 state can be compared exactly).
    activation: str | None = "gelu"

    def label(self) -> str:
        bias = "bias" if self.bias else "nobias"
        shape = "x".join(map(str, (*self.lead_shape, self.sizes[0])))
        return f"{'-'.join(map(str, self.sizes))}/{bias}/{self.activation or 'linear-only'}/in{shape}/{self.dtype}"


@dataclasses.dataclass(frozen=True)
class SideSpec:
    side: Side
    executor: ExecutorKind
    recipe_id: str
    cases: tuple[Case, ...]
    steps: int = 3
    micro_batches: int = 1
    ddp: bool = False
    #: Ranks per ``fp8_autocast(fp8_group=...)``: None is TE's default (the world), k is consecutive
    #: blocks of k ranks (1: each rank alone), the group an amax reduction must stay within.
    fp8_group_size: int | None = None
    lr: float = 0.05
    #: The eager side's scale update (the thunder side's is its executor's own).
    scale_update: ScaleUpdate = "fused"


@dataclasses.dataclass
class StepRecord:
    outputs: list[Any]
    input_grads: list[Any]
    param_grads: dict[str, Any]
    fp8_state: fp8state.Snapshot
    backward_syncs: int


@dataclasses.dataclass
class CaseRun:
    case: Case
    steps: list[StepRecord]
    linear_names: list[str]
    forward: TraceSummary | None = None
    backward: TraceSummary | None = None
    #: Legacy executor: whether the forward trace's program is wrapped in fp8_autocast with our recipe.
    legacy_autocast: dict[str, bool] | None = None
    sync_mode: str = ""
    #: Thunder side: cache entries compiled (thunder.cache_misses); each has its own TE FP8 state.
    cache_entries: int | None = None
    #: One process only: the traceback of a case that raised (the other cases still run and compare).
    error: str | None = None


def fp8_groups(world_size: int, group_size: int | None) -> list[list[int]]:
    """The ranks of each fp8 group: the world (None), or consecutive blocks of ``group_size`` ranks."""
    size = group_size or world_size
    if size < 1 or world_size % size:
        raise ValueError(f"fp8 groups of {size} ranks do not tile a world of {world_size}")
    return [list(range(first, first + size)) for first in range(0, world_size, size)]
