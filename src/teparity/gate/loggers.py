"""The logger registry that pytest walks, made safe to walk while another thread adds to it.

At the start of every setup, call and teardown, pytest's logging plugin iterates
``logging.Logger.manager.loggerDict`` (``_pytest.logging.catching_logs.__enter__``) without logging's lock.
The gate's processes import while tests run: torch from a thread after collection, a warm pool's
``torch.multiprocessing`` from its start-up thread, and whatever thunder, TE and torch's compiler import
lazily on threads of their own. A module that creates a logger then grows the dict mid-walk, and the main
thread raises ``RuntimeError: dictionary changed size during iteration``. In an xdist worker this is an
INTERNALERROR that ends the worker (docs/facts.md, "pytest's logger walk")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any


class SnapshotLoggerDict(dict[str, Any]):
    """``loggerDict`` whose iteration views are copies, taken under logging's lock (which ``getLogger`` holds
    while it inserts)."""

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> list[str]:  # type: ignore[override]
        with logging._lock:  # type: ignore[attr-defined]
            return list(super().keys())

    def values(self) -> list[Any]:  # type: ignore[override]
        with logging._lock:  # type: ignore[attr-defined]
            return list(super().values())

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        with logging._lock:  # type: ignore[attr-defined]
            return list(super().items())


def snapshot_logger_registry() -> None:
    """Rebind the logging manager's registry, with every logger it holds, to a ``SnapshotLoggerDict`` (once)."""
    manager = logging.Logger.manager
    with logging._lock:  # type: ignore[attr-defined]
        if not isinstance(manager.loggerDict, SnapshotLoggerDict):
            manager.loggerDict = SnapshotLoggerDict(manager.loggerDict)
