"""How a parity pair's ranks train: the strategies (``STRATEGIES``), one registry as ``records.ARCHITECTURES`` is of
networks. A spec names its strategy (``PairSpec.strategy``); its world size, its skip reason, the options it takes and
what the judges expect of it come from here. Plain data: the judges read it without the rank code. Each strategy's rank
code, both sides' programs, is a module of its own, ``teparity.inrank.strategies.<module>`` (docs/conventions.md,
"Adding a strategy").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from packaging.version import Version

from teparity.stack import since
from teparity.stack.reasons import fsdp_backend_unfit
from teparity.stack.thunder_api import FSDP_SHARDING

#: The spec fields a strategy may take (``Strategy.options``); each is None in a spec whose strategy does not take it.
OPTIONS = ("sharding", "bucketing", "reference")
#: The eager references of a sharding strategy: torch FSDP2 over the ``te.Linear`` twins, or torch DDP where FSDP2 over
#: ``te.Linear`` cannot run (``teparity.stack.reasons.fsdp_backend_unfit``).
REFERENCES = {"fsdp2": "torch FSDP2 (fully_shard) + eager TE", "ddp": "torch DDP + eager TE"}


@dataclasses.dataclass(frozen=True)
class Strategy:
    """A way of running a pair's ranks, said where it is registered."""

    name: str
    #: Its rank code: ``teparity.inrank.strategies.<module>.program(side, plain, spec, group, case, executor, recipe)``.
    module: str
    #: What the thunder side runs, for messages and evidence.
    words: str
    #: It runs on one rank whatever the session's world size.
    one_rank: bool = False
    #: The fewest ranks it runs on (a sharding strategy shards over 2+).
    min_ranks: int = 1
    #: The spec fields of ``OPTIONS`` it takes.
    options: tuple[str, ...] = ()
    #: thunder's DDP transform runs the thunder side: its legacy backward waits on gradient all-reduces, and where a
    #: build's transform rejects an input that requires grad, both sides train without one.
    thunder_ddp: bool = False
    #: Its thunder side runs under torch FSDP2, which cannot run where ``fsdp_backend_unfit`` says why: it is absent there.
    fsdp2: bool = False
    #: The compile path its thunder side is, which a spec of it takes (``PairSpec.compile_path``), or None: the spec's
    #: own (``thunder.jit`` where it names none).
    compile_path: str | None = None
    #: The first thunder build that has it, or None: every build the gate runs.
    since: Version | None = None

    def world_size(self, session: int) -> int:
        """Its ranks in a session of ``session`` ranks (``--teparity-world-size``)."""
        return 1 if self.one_rank else session

    def absent(self, world_size: int, thunder: str | None, *, backend: str, gpus: int) -> str | None:
        """Why it cannot run here (absent by design), or None."""
        if self.fsdp2 and (unfit := fsdp_backend_unfit(backend, gpus)):
            return f"{self.words}: {unfit}"
        if world_size < self.min_ranks:
            return f"{self.words} shards over {self.min_ranks}+ ranks; world size is {world_size} (--teparity-world-size)"
        if self.since is not None and thunder and not since.reached(thunder, self.since):
            return f"lightning-thunder {thunder} predates {self.words} (from {self.since})"
        return None

    def reference(self, backend: str, gpus: int) -> str | None:
        """The eager reference where it has a choice (``REFERENCES``): FSDP2 where it runs, DDP where it does not."""
        if "reference" not in self.options:
            return None
        return "ddp" if fsdp_backend_unfit(backend, gpus) else "fsdp2"

    def sharded_reference(self, spec: Any) -> str | None:
        """The eager reference of a spec of it that shards (``REFERENCES``): the spec's choice, or FSDP2 where FSDP2 runs
        the thunder side (and so runs here); None where it does not shard."""
        return spec.reference or ("fsdp2" if self.fsdp2 else None)

    def validate(self, spec: Any) -> None:
        """Raise ``ValueError`` where ``spec`` sets an option this strategy does not take, or misses one it needs."""
        if given := [option for option in OPTIONS if getattr(spec, option) is not None and option not in self.options]:
            raise ValueError(f"strategy {self.name} takes no {', '.join(given)} (its options: {list(self.options) or 'none'})")
        if "sharding" in self.options and spec.sharding not in FSDP_SHARDING:
            raise ValueError(f"strategy {self.name} needs sharding in {FSDP_SHARDING}, not {spec.sharding!r}")
        if spec.reference is not None and spec.reference not in REFERENCES:
            raise ValueError(f"strategy {self.name}: reference {spec.reference!r} is not one of {list(REFERENCES)}")
        if self.compile_path is not None and spec.compile_path != self.compile_path:
            raise ValueError(f"strategy {self.name} compiles with {self.compile_path}, not {spec.compile_path} (a spec "
                             "that names no compile path takes its strategy's)")

    def eager_spec(self, spec: Any) -> Any:
        """The eager side's spec: what it never reads set aside (thunder's bucketing; a DDP reference's sharding), so
        that one eager run serves every spec that differs there alone."""
        changes: dict[str, Any] = {"bucketing": None} if "bucketing" in self.options else {}
        if spec.reference == "ddp":
            changes["sharding"] = FSDP_SHARDING[0]
        return dataclasses.replace(spec, **changes) if changes else spec


#: Every strategy by name (``PairSpec.strategy``).
STRATEGIES: dict[str, Strategy] = {
    strategy.name: strategy for strategy in (
        Strategy("one-rank", "one_rank", "one rank", one_rank=True),
        Strategy("thunder-ddp", "thunder_ddp", "thunder ddp against torch DDP", thunder_ddp=True),
        Strategy("thunder-fsdp", "thunder_fsdp", "thunder fsdp", min_ranks=2, options=OPTIONS),
        Strategy("thunderfx-ddp", "thunderfx_ddp", "torch DDP around thunderfx", compile_path="thunderfx",
                 since=since.THUNDERFX_SINCE),
        Strategy("thunderfx-fsdp2", "thunderfx_fsdp2", "torch FSDP2 (fully_shard) around thunderfx", min_ranks=2,
                 options=("sharding",), fsdp2=True, compile_path="thunderfx", since=since.THUNDERFX_SINCE),
    )
}
