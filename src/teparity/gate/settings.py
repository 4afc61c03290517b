"""A run's settings, resolved once at configure from its options and torchrun's environment: one frozen object
that hooks and fixtures read (``settings(config)``). What needs the environment probe (the backend ``auto``
picks, whether ranks can be forked here) is resolved on first use, so that ``--help`` and collection never
probe."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from teparity.stack.environment import Environment

_SETTINGS = pytest.StashKey["Settings"]()


def probed_environment() -> Environment:
    """The probed environment (``teparity.stack.envprobe``), looked up at call time."""
    from teparity.stack import envprobe

    return envprobe.environment()


@dataclasses.dataclass(frozen=True)
class Settings:
    #: Harness deadline of a multi-rank run, seconds (``--teparity-timeout``).
    timeout: float
    #: Ranks of the multi-rank tests (``--teparity-world-size``; torchrun's WORLD_SIZE under torchrun; else 2).
    world_size: int
    #: ``--teparity-backend``: auto, gloo or nccl.
    backend_asked: str
    #: ``--teparity-ranks``: forked, warm or fresh.
    ranks_asked: str
    #: ``--teparity-sides``: serial or side-by-side.
    sides: str
    #: ``--teparity-report``: where the JSON report goes, or None.
    report: str | None
    #: ``--teparity-inject``: mutations applied in every process of the run.
    inject: tuple[str, ...]
    #: Tests run longest first (``-n`` without ``--dist``: ``teparity.gate.schedule``).
    longest_first: bool
    #: The xdist ``--dist`` mode, or None without ``-n``.
    dist: str | None
    #: ``--teparity-allow-no-thunder``: a run without thunder goes on (every check skips) instead of stopping.
    allow_no_thunder: bool = False
    #: ``--teparity-rows``: the report rows whose tests run (``checks.matches``); empty: every row.
    rows: tuple[str, ...] = ()
    #: ``--teparity-base``: the base's parity report, against which the run judges its change, or None.
    base: str | None = None
    #: ``--teparity-reference-store``: the folder of reusable reference sides (``teparity.gate.references``), or None.
    reference_store: str | None = None
    #: ``--teparity-fresh-reference``: compute every reference side, reusing none.
    fresh_reference: bool = False

    @functools.cached_property
    def backend(self) -> str:
        """The process-group backend of the multi-rank tests: NCCL with one GPU per rank where there are enough
        GPUs, else gloo, unless asked for."""
        if self.backend_asked != "auto":
            return self.backend_asked
        from teparity.gate.ranks import default_backend

        return default_backend(self.world_size)

    @functools.cached_property
    def ranks(self) -> tuple[str, str | None]:
        """The launch mode of this run and, where ``forked`` was asked for and cannot work here, why not (the
        run then uses warm ranks)."""
        if self.ranks_asked == "forked" and (why := probed_environment().fork_error):
            return "warm", why
        return self.ranks_asked, None

    def distribution(self) -> str:
        """How the tests are spread over processes, in words (the header's)."""
        if self.longest_first:
            return "longest first (expected durations: this checkout's last run, else teparity/gate/durations.json)"
        return f"--dist {self.dist}" if self.dist else "one process"


def resolve(config: pytest.Config, *, longest_first: bool) -> Settings:
    """The run's settings from its options, stashed for ``settings``."""
    from teparity.launch.torchrun import torchrun_world

    joined = torchrun_world()
    chosen = config.getoption("teparity_world_size")
    resolved = Settings(
        timeout=config.getoption("teparity_timeout"),
        world_size=chosen if chosen is not None else (joined[1] if joined else 2),
        backend_asked=config.getoption("teparity_backend"),
        ranks_asked=config.getoption("teparity_ranks"),
        sides=config.getoption("teparity_sides"),
        report=config.getoption("teparity_report"),
        inject=tuple(config.getoption("teparity_inject")),
        longest_first=longest_first,
        dist=config.option.dist if getattr(config.option, "numprocesses", None) else None,
        allow_no_thunder=config.getoption("teparity_allow_no_thunder"),
        rows=config.getoption("teparity_rows"),
        base=config.getoption("teparity_base"),
        reference_store=_reference_store(config),
        fresh_reference=config.getoption("teparity_fresh_reference"),
    )
    config.stash[_SETTINGS] = resolved
    return resolved


def _reference_store(config: pytest.Config) -> str | None:
    """``--teparity-reference-store``; by default pytest's cache folder (``.pytest_cache``), none without the cache
    provider (``-p no:cacheprovider``) or with ``--teparity-reference-store none``."""
    asked = config.getoption("teparity_reference_store")
    if asked is not None:
        return None if asked == "none" else str(Path(asked).resolve())
    cache = getattr(config, "cache", None)
    return None if cache is None else str(cache.mkdir("teparity-references"))


def settings(config: pytest.Config) -> Settings:
    return config.stash[_SETTINGS]
