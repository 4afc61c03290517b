"""The rank code's FP8 switching, where it runs without TE: what each side runs a step under
(``PairSpec.fp8_by_step``), the evaluation steps, the network that keeps its ends out of FP8."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from teparity.inrank import networks, sides
from teparity.records import FP8_MODES, Case, PairSpec


def _spec(**fields: Any) -> PairSpec:
    return PairSpec("functional", "delayed", (Case(),), steps=4, **fields)


def test_each_side_runs_a_step_as_its_mode_says_and_a_step_without_autocast_holds_thunder_to_fp8() -> None:
    """Checked against a schedule not cycled, the sides swapped, and "none" read as "off" for eager TE."""
    spec = _spec(fp8_by_step=("off", "none", "on"))
    assert [spec.fp8_at(step, "eager") for step in range(4)] == ["off", "on", "on", "off"]
    assert [spec.fp8_at(step, "thunder") for step in range(4)] == ["off", "none", "on", "off"]
    assert [_spec().fp8_at(step, side) for step in range(2) for side in ("eager", "thunder")] == ["on"] * 4
    assert set(FP8_MODES) == {"on", "off", "none"}


def test_an_evaluation_step_trains_nothing_and_needs_a_training_run() -> None:
    spec = _spec(eval_steps=(2,))
    assert [spec.trains_at(step) for step in range(4)] == [True, True, False, True]
    assert not any(_spec(train=False).trains_at(step) for step in range(4))
    with pytest.raises(ValueError, match="eval_steps need a training run"):
        _spec(train=False, eval_steps=(1,))
    with pytest.raises(ValueError, match=r"unknown FP8 mode\(s\) \['of'\]"):
        _spec(fp8_by_step=("on", "of"))
    assert _spec(fp8_by_step=("off",), eval_steps=(2,)).variant() == "FP8 by step ['off'], evaluation forwards at steps [2]"


def test_a_step_gets_the_programs_autocast_where_fp8_is_on_a_disabled_one_where_off_and_none_without(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked against "off" given the program's own autocast (the legacy thunder side's is none: FP8 would stay on
    by the caller's code) and "none" given a disabled autocast."""
    made: list[tuple[Any, bool]] = []

    @contextlib.contextmanager
    def autocast(recipe: Any, group: Any = None, *, enabled: bool = True) -> Iterator[None]:
        made.append((recipe, enabled))
        yield

    monkeypatch.setattr(sides, "te_autocast", autocast)
    own = object()
    program = types.SimpleNamespace(fp8=lambda recipe: own)
    spec = _spec(fp8_by_step=("on", "off", "none"))
    assert sides._fp8("thunder", spec, program, "r", 0) is own and made == []
    with sides._fp8("thunder", spec, program, "r", 1):
        assert made == [("r", False)]
    assert isinstance(sides._fp8("thunder", spec, program, "r", 2), contextlib.nullcontext)
    assert sides._fp8("eager", spec, program, "r", 2) is own


def test_the_network_with_its_ends_out_of_fp8_runs_them_in_disabled_autocasts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its linears are plain_mlp's of the same seed (the reference's weights), the first and last run inside
    ``te_autocast(enabled=False)`` and the middle one outside any. Checked against the ends swapped for the middle."""
    from teparity.stack import te_api

    inside: list[bool] = []
    depth = [0]

    @contextlib.contextmanager
    def autocast(recipe: Any, group: Any = None, *, enabled: bool = True) -> Iterator[None]:
        assert recipe is None and not enabled
        depth[0] += 1
        yield
        depth[0] -= 1

    monkeypatch.setattr(te_api, "te_autocast", autocast)
    sizes = (32, 64, 64, 16)
    net = networks.fp8_off_ends_mlp(sizes, seed=7)
    for layer in net:
        layer.register_forward_hook(lambda module, args, out: inside.append(depth[0] == 1))
    plain = networks.plain_mlp(sizes, seed=7, bias=False, activation=None)
    x = torch.randn(16, 32)
    assert torch.equal(net(x), plain(x)) and inside == [True, False, True]
    assert networks.linear_names(net) == ["0", "1", "2"]


def test_cuda_graphs_put_thunders_transform_after_the_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked against the transform dropped, put first (before the executor's own) and added unasked."""
    from thunder.transforms.cudagraph import CUDAGraphTransform

    from teparity.inrank import program

    executors = object()
    monkeypatch.setattr(program, "jit_options", lambda info, recipe: {"transforms": [executors]})
    spec = _spec(cuda_graphs=True)
    first, graphs = program.thunder_options(spec, None, None)["transforms"]
    assert first is executors and isinstance(graphs, CUDAGraphTransform)
    assert program.thunder_options(_spec(), None, None)["transforms"] == [executors]
    assert spec.variant() == "thunder's CUDA graph transform"


def test_the_fp8_where_off_model_turns_only_the_eager_sides_off_steps_on() -> None:
    """``PairSpec.fp8_where_off`` (a defect model's eager side): an "off" step runs as the model says on the eager side;
    "none" and "on" steps, and the thunder side, run as the caller says. Checked against an unknown value."""
    from teparity.records import FP8_WHERE_OFF

    for model in FP8_WHERE_OFF:
        spec = _spec(fp8_by_step=("off", "none", "on"), fp8_where_off=model)
        assert [spec.fp8_at(step, "eager") for step in range(3)] == [model, "on", "on"]
        assert [spec.fp8_at(step, "thunder") for step in range(3)] == ["off", "none", "on"]
    with pytest.raises(ValueError, match="unknown fp8_where_off 'yes'"):
        _spec(fp8_where_off="yes")


def test_the_model_without_forward_update_takes_the_programs_autocast_and_lets_the_backward_update_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An "on-without-forward-update" step enters the program's own autocast with TE's forward update a no-op: the
    backward's update (``forward=False``) still reaches TE. A stand-in for TE's state manager: no TE on the CPU."""
    import sys

    calls: list[bool] = []

    class Manager:
        @staticmethod
        def reduce_and_update_fp8_tensors(forward: bool = True) -> None:
            calls.append(forward)

    fp8 = types.ModuleType("transformer_engine.pytorch.fp8")
    fp8.FP8GlobalStateManager = Manager  # type: ignore[attr-defined]
    for name, module in (("transformer_engine", types.ModuleType("transformer_engine")),
                         ("transformer_engine.pytorch", types.ModuleType("transformer_engine.pytorch")),
                         ("transformer_engine.pytorch.fp8", fp8)):
        monkeypatch.setitem(sys.modules, name, module)
    entered: list[str] = []

    @contextlib.contextmanager
    def own(recipe: Any) -> Iterator[None]:
        entered.append(recipe)
        yield

    program = types.SimpleNamespace(fp8=own)
    spec = _spec(fp8_by_step=("off",), fp8_where_off="on-without-forward-update")
    with sides._fp8("eager", spec, program, "r", 0):
        Manager.reduce_and_update_fp8_tensors(forward=True)
        Manager.reduce_and_update_fp8_tensors(forward=False)
    Manager.reduce_and_update_fp8_tensors(forward=True)
    assert entered == ["r"] and calls == [False, True]


def test_the_models_network_runs_its_ends_in_fp8(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ends_off`` False (what ``program.eager_module`` sets under ``fp8_where_off``): no disabled autocast at all."""
    from teparity.stack import te_api

    def autocast(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a disabled autocast in the model's network")

    monkeypatch.setattr(te_api, "te_autocast", autocast)
    net = networks.fp8_off_ends_mlp((32, 64, 16), seed=7)
    net.ends_off = False
    plain = networks.plain_mlp((32, 64, 16), seed=7, bias=False, activation=None)
    x = torch.randn(4, 32)
    assert torch.equal(net(x), plain(x))
