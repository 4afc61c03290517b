"""Compare the evidence of two parity sides; every difference names where it is and how far.

Functions return lists of difference messages (empty: equal within the rule) plus, where useful, a
short statistic for the parity report, so that one failure message can list every difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from teparity.judge.tolerances import Tolerance
from teparity.records import CaseRun, DdpTransformRun, Snapshot

if TYPE_CHECKING:  # torch is imported where a comparison runs, not where the gate's tests are collected
    import torch

MAX_LISTED = 12


@dataclasses.dataclass
class Comparison:
    differences: list[str] = dataclasses.field(default_factory=list)
    #: Largest absolute difference seen per quantity ("output", "grad", "scale", ...).
    max_abs: dict[str, float] = dataclasses.field(default_factory=dict)
    compared: int = 0
    #: Largest distance in float32 ulps per FP8-state quantity (the unit of the FP8-state rules).
    max_ulps: dict[str, int] = dataclasses.field(default_factory=dict)
    #: (step, micro-batch) of each numeric difference; micro None for parameter gradients and FP8 state.
    parted_at: list[tuple[int, int | None]] = dataclasses.field(default_factory=list)
    #: The rule each quantity was judged by, in a few words ("bitwise", "rtol 0 atol 0.000977", "128 ulp").
    allowed: dict[str, str] = dataclasses.field(default_factory=dict)

    def differ(self, message: str, at: tuple[int, int | None]) -> None:
        """Record a numeric difference and the (step, micro-batch) where it is."""
        self.differences.append(message)
        self.parted_at.append(at)

    def first_difference(self) -> tuple[int, int | None] | None:
        """The earliest (step, micro-batch) that differs; within a step, micro-batches before the rest."""
        return min(self.parted_at, key=lambda at: (at[0], at[1] if at[1] is not None else float("inf")), default=None)

    def note(self, quantity: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance | None = None) -> None:
        self.compared += 1
        if tol is not None:
            self.allowed[quantity.split("@")[0]] = tol.words()
        if expected.shape == actual.shape and expected.numel():
            diff = (expected.double() - actual.double()).abs().max().item()
            self.max_abs[quantity] = max(self.max_abs.get(quantity, 0.0), diff)

    def summary(self) -> str:
        stats = ", ".join(f"max|d| {q} {v:.3g}" for q, v in sorted(self.max_abs.items()))
        ulps = ", ".join(f"max ulp {q} {v}" for q, v in sorted(self.max_ulps.items()))
        return f"{self.compared} tensors compared; {stats or 'no statistics'}" + (f"; {ulps}" if ulps else "")

    def message(self, header: str) -> str:
        shown = self.differences[:MAX_LISTED]
        more = len(self.differences) - len(shown)
        tail = f"\n  ... and {more} more" if more > 0 else ""
        first = self.differences[0] if self.differences else "none"
        listed = "\n  ".join(shown) + tail
        return f"{len(self.differences)} difference(s), first: {first}\n  {header}\n  {listed}\n  {self.summary()}"


def ulp_distance(expected: torch.Tensor, actual: torch.Tensor) -> int:
    """Largest number of float32 values between corresponding entries (0: bitwise equal; both signs)."""
    import torch

    def ordered(t: torch.Tensor) -> torch.Tensor:
        bits = t.detach().to(torch.float32).contiguous().view(torch.int32).long()
        return torch.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    return int((ordered(expected) - ordered(actual)).abs().max().item())


def _close(
    result: Comparison, where: str, quantity: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance,
    *, at: tuple[int, int | None],
) -> None:
    import torch

    result.note(quantity, expected, actual, tol)
    if expected.numel() and not expected.abs().gt(0).any():
        result.differ(f"{where}: eager reference is all zeros (nothing to compare)", at)
        return
    try:
        torch.testing.assert_close(
            actual, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=False,
            msg=lambda m: f"{where}: {' '.join(m.split())} [rule: rtol {tol.rtol:g} atol {tol.atol:g}, {tol.source}]",
        )
    except AssertionError as error:
        result.differ(str(error), at)


def _input_grads(
    result: Comparison, where: str, quantity: str, expected: torch.Tensor | None, actual: torch.Tensor | None,
    tol: Tolerance, *, at: tuple[int, int | None],
) -> None:
    """Input gradients, where the input required grad (None: it did not); one side only is a difference."""
    if (expected is None) != (actual is None):
        result.differ(f"{where}: an input grad on the {'reference' if actual is None else 'thunder'} side only", at)
    elif expected is not None:
        _close(result, f"{where} input grad", quantity, expected, actual, tol, at=at)


def _param_grads(
    result: Comparison, where: str, quantity: str, expected: dict[str, torch.Tensor], actual: dict[str, torch.Tensor],
    tol: Tolerance, *, at: tuple[int, int | None],
) -> None:
    """The parameter gradients of one step: the same parameters on both sides, each one close."""
    if sorted(expected) != sorted(actual):
        result.differ(f"{where}: gradients for {sorted(expected)} vs thunder {sorted(actual)}", at)
    for name in sorted(set(expected) & set(actual)):
        _close(result, f"{where} grad of {name}", quantity, expected[name], actual[name], tol, at=at)


def compare_numerics(eager: CaseRun, thunder: CaseRun, tol: Tolerance, *, rank: int, result: Comparison) -> None:
    """Outputs, input gradients and parameter gradients of every step and micro-batch."""
    for step, (e, t) in enumerate(zip(eager.steps, thunder.steps, strict=True)):
        prefix = f"rank {rank} case {eager.case.label()} step {step}"
        for micro, (ey, ty) in enumerate(zip(e.outputs, t.outputs, strict=True)):
            _close(result, f"{prefix} micro {micro} output", f"output@step{step}", ey, ty, tol, at=(step, micro))
        for micro, (eg, tg) in enumerate(zip(e.input_grads, t.input_grads, strict=True)):
            _input_grads(result, f"{prefix} micro {micro}", f"grad@step{step}", eg, tg, tol, at=(step, micro))
        _param_grads(result, prefix, f"grad@step{step}", e.param_grads, t.param_grads, tol, at=(step, None))


def compare_ddp_runs(
    expected_by_rank: Sequence[DdpTransformRun], actual_by_rank: Sequence[DdpTransformRun], tol: Tolerance,
    *, result: Comparison,
) -> None:
    """Outputs, input gradients and all-reduced parameter gradients of every rank and step; an input
    gradient on one side only is a difference."""
    for rank, (expected, actual) in enumerate(zip(expected_by_rank, actual_by_rank, strict=True)):
        for step, (ey, ay) in enumerate(zip(expected.outputs, actual.outputs, strict=True)):
            prefix = f"rank {rank} step {step}"
            _close(result, f"{prefix} output", f"output@step{step}", ey, ay, tol, at=(step, 0))
            eg, ag = expected.input_grads[step], actual.input_grads[step]
            _input_grads(result, prefix, f"grad@step{step}", eg, ag, tol, at=(step, 0))
            _param_grads(result, prefix, f"grad@step{step}", expected.param_grads[step], actual.param_grads[step], tol,
                         at=(step, None))


def compare_state(
    expected: Snapshot, actual: Snapshot, amax_tol: Tolerance, scale_tol: Tolerance, *, where: str, result: Comparison,
    step: int,
) -> None:
    """Amax histories within ``amax_tol``, scales within ``scale_tol`` (zero tolerances: bitwise)."""
    at = (step, None)
    if sorted(expected) != sorted(actual) or any(sorted(expected[k]) != sorted(actual[k]) for k in expected):
        result.differ(f"{where}: FP8 state covers {_layout(expected)} in the reference but {_layout(actual)} in the other", at)
        return
    for linear in sorted(expected):
        for role in sorted(expected[linear]):
            e, a = expected[linear][role], actual[linear][role]
            here = f"{where} linear {linear} {role}"
            _state_tensor(result, f"{here} amax_history", "amax_history", e["amax_history"], a["amax_history"], amax_tol, at)
            _state_tensor(result, f"{here} scale", "scale", e["scale"], a["scale"], scale_tol, at)


def _state_tensor(
    result: Comparison, where: str, quantity: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance,
    at: tuple[int, int | None],
) -> None:
    """Within ``tol.ulps`` float32 ulps, or within ``tol.rtol``/``tol.atol`` where those are set, or
    bitwise (amax histories start as zeros: no zero guard; with ``atol`` 0 a zero matches only a zero)."""
    import torch

    result.note(quantity, expected, actual, tol)
    if expected.shape != actual.shape:
        result.differ(f"{where} differs: {_first_mismatch(expected, actual)}", at)
        return
    allowed = tol.ulps or 0
    floats = expected.dtype == actual.dtype == torch.float32
    distance = ulp_distance(expected, actual) if floats and expected.numel() else None
    if distance is not None:
        result.max_ulps[quantity] = max(result.max_ulps.get(quantity, 0), distance)
    if torch.equal(expected, actual) or (allowed and distance is not None and distance <= allowed):
        return
    relative = bool(tol.rtol or tol.atol)
    if relative and torch.allclose(actual, expected, rtol=tol.rtol, atol=tol.atol):
        return
    rule = tol.source if allowed or relative else f"bitwise, {tol.source}"
    far = f"; {distance} ulp apart" if distance is not None else ""
    result.differ(f"{where} differs (rule: {rule}): {_first_mismatch(expected, actual)}{far}", at)


def _layout(snapshot: Snapshot) -> str:
    return "{" + ", ".join(f"{k}: {sorted(v)}" for k, v in sorted(snapshot.items())) + "}"


def _first_mismatch(expected: torch.Tensor, actual: torch.Tensor) -> str:
    if expected.shape != actual.shape:
        return f"shape {tuple(actual.shape)} vs {tuple(expected.shape)}"
    mismatched = expected != actual
    if expected.dim() == 0:
        return f"{actual.item()!r} vs {expected.item()!r}"
    where = tuple(mismatched.nonzero()[0].tolist())
    return f"{int(mismatched.sum())} of {expected.numel()} entries, first at {where}: {actual[where].item()!r} vs {expected[where].item()!r}"


def compare_across_ranks(
    runs_by_rank: list[list[CaseRun]], *, result: Comparison, groups: Sequence[Sequence[int]] | None = None,
    reference: list[list[CaseRun]] | None = None,
) -> None:
    """Within each group of ranks (default: all of them), every rank's FP8 state equals the group's first rank's,
    bitwise, at every step (the amax reduction over that group happened). With the ``reference``'s runs by rank, only
    where the reference's ranks agree: a defect's model whose ranks part (a recomputation's amaxes, recorded after
    the reduction) says where thunder's may, and the comparison with that model holds each rank there."""
    exact = Tolerance(0.0, 0.0, "identical on every rank of an fp8 group")
    for first, *others in groups or [range(len(runs_by_rank))]:
        for rank in others:
            for index, (run0, run) in enumerate(zip(runs_by_rank[first], runs_by_rank[rank], strict=True)):
                for step, (s0, s) in enumerate(zip(run0.steps, run.steps, strict=True)):
                    where = f"rank {rank} vs rank {first} case {run.case.label()} step {step}"
                    parted = _parted_in(reference, first, rank, index, step) if reference else set()
                    compare_state(_without(s0.fp8_state, parted), _without(s.fp8_state, parted), exact, exact,
                                  where=where, result=result, step=step)


def _parted_in(runs_by_rank: list[list[CaseRun]], first: int, rank: int, index: int, step: int) -> set[tuple[str, str]]:
    """The (linear, role) FP8 states in which ``rank`` differs from ``first`` at ``step`` of case ``index``."""
    import torch

    steps = [runs_by_rank[r][index].steps for r in (first, rank)]
    if any(len(s) <= step for s in steps):
        return set()
    expected, actual = (s[step].fp8_state for s in steps)
    return {
        (linear, role)
        for linear in expected.keys() & actual.keys()
        for role in expected[linear].keys() & actual[linear].keys()
        if any(not torch.equal(expected[linear][role][q], actual[linear][role][q]) for q in ("amax_history", "scale"))
    }


def _without(snapshot: Snapshot, parted: set[tuple[str, str]]) -> Snapshot:
    return {linear: {role: v for role, v in roles.items() if (linear, role) not in parted} for linear, roles in snapshot.items()}


def state_is_empty(runs_by_rank: list[list[CaseRun]]) -> bool:
    """True when no case kept FP8 scaling state (a recipe without it, such as current scaling)."""
    return all(not step.fp8_state for runs in runs_by_rank for run in runs for step in run.steps)
