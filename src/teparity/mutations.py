"""Known regressions of thunder's TE executors, injectable into the installed thunder at run time.

Each entry patches the real thunder in the current process. ``pytest --teparity-inject NAME`` applies
it in every test process and, through ``TEPARITY_INJECT``, in every spawned rank, so that the gate can
be shown to fail on the regression it exists to catch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from teparity.versions import BACKWARD_SYNC_SYMBOL, SYNC_INSERTION_HELPER, executor_module, find_te_executors

ENV_VAR = "TEPARITY_INJECT"


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    #: Which thunder builds it applies to, in words (the apply function checks for real).
    applies_to: str
    apply: Callable[[], None]


def _legacy_module() -> Any:
    info = find_te_executors()["legacy"]
    if not info.has_backward_sync:
        raise LookupError(f"cannot inject: this thunder's legacy TE executor has no {BACKWARD_SYNC_SYMBOL}")
    return executor_module(info)


def _patch_sync_insertion(place: Callable[[list[Any], Any], None]) -> None:
    """Replace the legacy executor's sync insertion; ``place(bound_symbols, sync_bsym)`` puts the sync."""
    module = _legacy_module()

    def insert(bw_extrace: Any) -> None:
        place(bw_extrace.bound_symbols, getattr(module, BACKWARD_SYNC_SYMBOL).bind(output=None))

    insert.__qualname__ = f"teparity_mutant_{SYNC_INSERTION_HELPER}"
    setattr(module, SYNC_INSERTION_HELPER, insert)


def _after_return(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.append(sync)  # thunder before PR #591: insert(len(...) - 1 + 1)


def _missing(bound_symbols: list[Any], sync: Any) -> None:
    del bound_symbols, sync


def _duplicated(bound_symbols: list[Any], sync: Any) -> None:
    bound_symbols.insert(len(bound_symbols) - 1, sync)
    bound_symbols.insert(len(bound_symbols) - 1, sync)


_SYNC_BUILDS = "thunder with the legacy TE executor's backward sync (0.2.0.dev20240519 .. 0.2.6)"

CATALOG: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "sync-after-return",
            "the backward FP8 sync appended after the backward trace's return, so it never runs "
            "(the bug fixed by thunder PR #591, 2024-06-14)",
            _SYNC_BUILDS,
            lambda: _patch_sync_insertion(_after_return),
        ),
        Mutation(
            "sync-missing",
            "the backward FP8 sync never inserted: backward amax/scale updates silently stop",
            _SYNC_BUILDS,
            lambda: _patch_sync_insertion(_missing),
        ),
        Mutation(
            "sync-duplicated",
            "the backward FP8 sync inserted twice: amax histories roll twice per step",
            _SYNC_BUILDS,
            lambda: _patch_sync_insertion(_duplicated),
        ),
    )
}


def active() -> list[str]:
    """Names of the mutations requested for this process tree."""
    return [name for name in os.environ.get(ENV_VAR, "").split(",") if name]


def apply(names: list[str]) -> None:
    unknown = [name for name in names if name not in CATALOG]
    if unknown:
        raise KeyError(f"unknown mutation(s) {unknown}; the catalog has {sorted(CATALOG)}")
    for name in names:
        CATALOG[name].apply()


def apply_from_env() -> None:
    """Apply what ``TEPARITY_INJECT`` asks for (called at the start of every rank)."""
    apply(active())
