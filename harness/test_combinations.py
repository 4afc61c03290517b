"""The pieces of the combination rows that run without TE (``tests/features``' resume, input-shape, frozen-adapter and
shared-linear checks): the networks, what a checkpoint without FP8 state holds, the per-step shapes and resume step of a
spec, and which backward traces a snapshot reads after a cache hit."""

from __future__ import annotations

import types

import pytest
import torch

from teparity.inrank import networks
from teparity.records import ARCHITECTURES, Case, PairSpec


def test_the_adapter_network_trains_its_adapter_alone_and_casts_its_input() -> None:
    """Checked against a frozen flag lost (a base or head gradient) and a missing cast (a dtype error)."""
    net = networks.adapter_mlp((48, 64, 16), seed=5, dtype=torch.bfloat16)
    x = torch.randn(2, 8, 48, requires_grad=True)  # fp32, as ARCHITECTURES["adapter"].input_dtype says
    net(x).float().sum().backward()
    assert {name for name, p in net.named_parameters() if p.grad is not None} == {"down.weight", "up.weight"}
    assert x.grad is not None and x.grad.dtype == torch.float32
    assert ARCHITECTURES["adapter"].input_dtype == "float32"
    assert networks.linear_names(net) == ["base", "down", "up", "head"]


def test_the_shared_linear_runs_twice_and_a_second_call_module_takes_the_second_call() -> None:
    """``SECOND_CALL``, where a defect model registers it, takes the second call on the same parameters; without it,
    the shared linear runs both."""
    net = networks.shared_linear_mlp((32, 64, 16), seed=6)
    calls = []
    net.shared.register_forward_hook(lambda module, args, out: calls.append("shared"))
    x = torch.randn(16, 32)
    y = net(x)
    assert calls == ["shared", "shared"] and ARCHITECTURES["shared"].linear_calls(3) == 4
    second = torch.nn.Linear(64, 64, bias=False)
    second.weight = net.shared.weight
    second.register_forward_hook(lambda module, args, out: calls.append(networks.SECOND_CALL))
    net.add_module(networks.SECOND_CALL, second)
    assert torch.equal(net(x), y) and calls[2:] == ["shared", networks.SECOND_CALL]


def test_a_checkpoint_without_fp8_state_drops_the_extra_state_alone() -> None:
    saved = {"0.weight": 1, "0._extra_state": 2, "1.weight": 3, "1._extra_state": 4}
    assert networks.without_fp8_state(saved) == {"0.weight": 1, "1.weight": 3}


def test_a_spec_says_the_shape_of_each_step_and_the_step_after_the_checkpoint() -> None:
    case = Case(lead_shape=(16,))
    spec = PairSpec("functional", "delayed", (case,), steps=4, lead_shapes_by_step=((2, 16), (2, 32)))
    assert [spec.lead_shape_at(case, step) for step in range(4)] == [(2, 16), (2, 32), (2, 16), (2, 32)]
    assert PairSpec("functional", "delayed", (case,)).lead_shape_at(case, 3) == (16,)
    assert PairSpec("functional", "delayed", (case,), steps=6, resume_into="eager").resume_step() == 3
    assert PairSpec("functional", "delayed", (case,), steps=6).resume_step() is None
    words = PairSpec("legacy", "delayed", (case,), resume_into="thunder", cache="symbolic values").variant()
    assert "resumed from a checkpoint into thunder" in words and "cache='symbolic values'" in words


def test_a_snapshot_after_a_cache_hit_reads_the_backward_of_the_entry_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """thunder's ``last_backward_traces`` stay the entry compiled last after a hit of an older entry: the backward of
    the entry whose computation traces are ``last_traces`` is the one that ran (checked against the stale one)."""
    thunder = pytest.importorskip("thunder")
    from teparity.inrank import recording

    first = types.SimpleNamespace(computation_traces=["fwd A"], backward_traces=["bwd A"])
    second = types.SimpleNamespace(computation_traces=["fwd B"], backward_traces=["bwd B"])
    stats = types.SimpleNamespace(interpreter_cache=[first, second])
    monkeypatch.setattr(thunder, "compile_stats", lambda fn: stats)
    monkeypatch.setattr(thunder, "last_traces", lambda fn: first.computation_traces)
    monkeypatch.setattr(thunder, "last_backward_traces", lambda fn: second.backward_traces)  # stale: B compiled last
    assert recording.executed_backward_traces(object()) == ["bwd A"]
    monkeypatch.setattr(thunder, "compile_stats", lambda fn: None)  # no cache to search: thunder's own answer
    assert recording.executed_backward_traces(object()) == ["bwd B"]
