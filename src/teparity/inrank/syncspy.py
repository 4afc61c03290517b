"""Count the backward FP8 syncs that actually run: a labeled spy on the call target of the sync symbol.

The legacy executor's ``te_sync_fp8_meta_bwd`` calls ``FP8GlobalStateManager.reduce_and_update_fp8_tensors(
forward=False)``, looked up in the executor's module at run time. With TE installed, ``spy`` wraps that
real classmethod and calls through (TE's own per-module syncs are counted too, which is the point).
On a CPU runner, where TE is absent and the module has no ``FP8GlobalStateManager``, ``recorder``
stands in its place and only records: the sync symbol then still runs, and is still counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

_TARGET = "FP8GlobalStateManager"
_METHOD = "reduce_and_update_fp8_tensors"


@dataclasses.dataclass
class SyncRecord:
    #: "spy (calls through to TE)" or "recorder (TE absent: stands in for FP8GlobalStateManager)".
    mode: str
    #: The ``forward`` argument of every call, in order.
    calls: list[bool] = dataclasses.field(default_factory=list)

    def backward_calls(self) -> int:
        return sum(1 for forward in self.calls if not forward)


def _forward_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(kwargs.get("forward", args[0] if args else True))


def _te_manager() -> Any | None:
    try:
        from teparity.stack.te_api import fp8_global_state_manager

        return fp8_global_state_manager()
    except ImportError:
        return None


@contextlib.contextmanager
def record_fp8_syncs(legacy_module: Any | None) -> Iterator[SyncRecord]:
    """Record every ``reduce_and_update_fp8_tensors`` call: TE's own class when TE imports, else a
    recorder in ``legacy_module`` where the sync symbol looks it up."""
    manager = _te_manager()
    if manager is not None:
        record = SyncRecord(mode="spy (calls through to TE)")
        original = manager.__dict__[_METHOD]
        real = getattr(manager, _METHOD)

        def spy(cls: type, *args: Any, **kwargs: Any) -> Any:
            record.calls.append(_forward_argument(args, kwargs))
            return real(*args, **kwargs)

        setattr(manager, _METHOD, classmethod(spy))
        try:
            yield record
        finally:
            setattr(manager, _METHOD, original)
        return

    if legacy_module is None:
        raise LookupError("TE is not importable and there is no legacy executor module to record in")
    record = SyncRecord(mode=f"recorder (TE absent: stands in for {_TARGET})")

    class RecordingFP8GlobalStateManager:
        """Labeled stand-in for TE's FP8GlobalStateManager on a runner without TE: records, does nothing."""

        @classmethod
        def reduce_and_update_fp8_tensors(cls, *args: Any, **kwargs: Any) -> None:
            record.calls.append(_forward_argument(args, kwargs))

    setattr(legacy_module, _TARGET, RecordingFP8GlobalStateManager)
    try:
        yield record
    finally:
        delattr(legacy_module, _TARGET)
