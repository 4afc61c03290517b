"""Where the functional executor's amax reductions sit among thunder FSDP's collectives (``teparity.judge.fsdp_order``),
on traces of the shape the H200 showed for ZeRO3 with two linears (docs/results/h200-te2.20.2-b23f62b): one order on
every rank passes; a rank that issues an amax update before a wait its peer issues first is reported, with the
position where the ranks part; updates issued while a gather is in flight are counted."""

from __future__ import annotations

from teparity.judge.fsdp_order import in_flight_updates, order_differences, placement
from teparity.records import Case, CaseRun
from teparity.trace_summary import SymbolRow, TraceSummary

UPDATE = "te_fp8_amax_and_scale_update_{}"
FORWARD = ["torch_all_gather_prim_impl"] * 4 + ["torch_wait_prim_impl"] * 2 + [UPDATE.format(0)] + \
    ["torch_wait_prim_impl"] * 2 + [UPDATE.format(1)]
BACKWARD = [UPDATE.format(2), UPDATE.format(3)] + ["torch_reduce_scatter_prim_impl"] * 4 + ["torch_wait_prim_impl"] * 4


def _summary(names: list[str], label: str) -> TraceSummary:
    rows = [SymbolRow(i, name, "other", name) for i, name in enumerate(["unpack_trivial", *names, "python_return"])]
    return TraceSummary(label, tuple(rows))


def _ranks(*forwards: list[str]) -> list[list[CaseRun]]:
    return [[CaseRun(Case(activation=None), [], ["0", "1"], forward=_summary(forward, f"rank {rank} forward"),
                     backward=_summary(BACKWARD, f"rank {rank} backward"))] for rank, forward in enumerate(forwards)]


def test_one_order_on_every_rank_is_no_difference() -> None:
    ranks = _ranks(FORWARD, FORWARD)
    assert order_differences(ranks) == []
    assert placement(ranks) == ("forward: all_gather x4 > wait x2 > te_fp8_amax_and_scale_update_0 > wait x2 > "
                                "te_fp8_amax_and_scale_update_1 (1 updates with a collective in flight); backward: "
                                "te_fp8_amax_and_scale_update_2 > te_fp8_amax_and_scale_update_3 > reduce_scatter x4 > "
                                "wait x4 (0 with one in flight)")


def test_a_rank_that_reduces_amaxes_before_its_wait_parts_from_its_peer() -> None:
    early = FORWARD[:4] + [UPDATE.format(0)] + FORWARD[4:6] + FORWARD[7:]
    differences = order_differences(_ranks(FORWARD, early))
    assert len(differences) == 1 and "rank 1 issues" in differences[0] and "first parting at position 4" in differences[0]
    assert "can deadlock" in differences[0]


def test_updates_with_a_gather_in_flight_are_counted() -> None:
    assert in_flight_updates(_summary(FORWARD, "f")) == 1  # 4 gathers, 2 waits: 2 in flight at the first update
    assert in_flight_updates(_summary(BACKWARD, "b")) == 0
