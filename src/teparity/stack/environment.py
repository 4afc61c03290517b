"""What the environment probe (``teparity.stack.envprobe``) read on this machine: versions, GPUs, thunder's TE
executors, import failures and what a fork server may preload. Plain data that travels as JSON; what the
gate cannot run here, and why, is ``teparity.stack.reasons``'s."""

from __future__ import annotations

import dataclasses
from typing import Any

from teparity.stack.executors import ExecutorInfo, ExecutorKind
from teparity.stack.since import FP8_MIN_CAPABILITY
from teparity.stack.versions import Versions


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    name: str
    capability: tuple[int, int]

    @property
    def fp8(self) -> bool:
        return tuple(self.capability) >= FP8_MIN_CAPABILITY

    def describe(self) -> str:
        return f"{self.name} (sm_{self.capability[0]}{self.capability[1]})"


@dataclasses.dataclass(frozen=True)
class Environment:
    """What this machine can run, as read by the environment probe (see envprobe.py)."""

    versions: Versions
    gpus: tuple[GpuInfo, ...]
    executors: dict[ExecutorKind, ExecutorInfo]
    #: Why ``import transformer_engine.pytorch`` failed, or None if it worked or TE is absent.
    te_import_error: str | None
    thunder_import_error: str | None
    #: Why ranks cannot be forked from a preloaded fork server here, or None (the probe's ``fork_error``).
    fork_error: str | None = None
    #: What the fork server imports: the most ``fork_stages()`` after which a forked child ran CUDA.
    fork_modules: tuple[str, ...] = ()
    #: Why a later stage is left out of ``fork_modules``, or None.
    fork_note: str | None = None
    #: The CUDA torch was built with (``torch.version.cuda``; None for a CPU build, or no torch): which TE core fits.
    torch_cuda: str | None = None

    def fork_preload(self) -> str:
        """What the fork server imports here, and why no more (the header's and ``doctor``'s words)."""
        return ", ".join(self.fork_modules) + (f"; {self.fork_note}" if self.fork_note else "")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Environment:
        return cls(
            versions=Versions(**data["versions"]),
            gpus=tuple(GpuInfo(g["name"], tuple(g["capability"])) for g in data["gpus"]),
            executors={k: ExecutorInfo(**v) for k, v in data["executors"].items()},
            te_import_error=data["te_import_error"],
            thunder_import_error=data["thunder_import_error"],
            fork_error=data.get("fork_error"),  # reports written before forked ranks have none
            fork_modules=tuple(data.get("fork_modules", ())),  # nor these, before staged preloads
            fork_note=data.get("fork_note"),
            torch_cuda=data.get("torch_cuda"),  # reports before TE's install line followed torch's CUDA have none
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "versions": self.versions.to_json(),
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
            "executors": {k: v.as_dict() for k, v in self.executors.items()},
            "te_import_error": self.te_import_error,
            "thunder_import_error": self.thunder_import_error,
            "fork_error": self.fork_error,
            "fork_modules": list(self.fork_modules),
            "fork_note": self.fork_note,
            "torch_cuda": self.torch_cuda,
        }
