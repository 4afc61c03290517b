"""Which linear an FP8 state belongs to (``teparity.inrank.fp8state``): named by the parameter behind the TE linear's
weight argument, so that linears thunder reorders keep their names. Under thunder's FSDP that argument is the
parameter's shard gathered (``all_gather`` then ``wait``): the trace below has the shape of thunder 0.2.6's ZeRO3
forward of the llama block on the CPU, which runs ``wk`` before ``wq``."""

from __future__ import annotations

import dataclasses

from teparity.inrank.fp8state import _by_name, parameters_behind


@dataclasses.dataclass(frozen=True)
class _Proxy:
    name: str


@dataclasses.dataclass(frozen=True)
class _Symbol:
    flat_proxy_args: tuple[_Proxy, ...]
    flat_proxy_outs: tuple[_Proxy, ...]


@dataclasses.dataclass(frozen=True)
class _Trace:
    bound_symbols: tuple[_Symbol, ...]


def _gathered(parameter: str, future: str, full: str) -> tuple[_Symbol, _Symbol]:
    """``all_gather(shard) -> future``, ``wait(future) -> full``."""
    return _Symbol((_Proxy(parameter),), (_Proxy(future),)), _Symbol((_Proxy(future),), (_Proxy(full),))


NAMES = ["wq", "wk", "wv"]
FSDP_TRACE = _Trace((*_gathered("t_wk_weight", "ft1", "t2"), *_gathered("t_wq_weight", "ft3", "t4"),
                     *_gathered("t_wv_weight", "ft5", "t6"), _Symbol((_Proxy("x"), _Proxy("t6")), (_Proxy("t7"),))))


def test_under_fsdp_a_gathered_weight_is_named_by_its_parameter() -> None:
    weights = [_Proxy("t2"), _Proxy("t4"), _Proxy("t6")]  # the TE linears in trace order: wk, wq, wv
    assert parameters_behind(FSDP_TRACE, weights, NAMES) == ["t_wk_weight", "t_wq_weight", "t_wv_weight"]
    states = [{"input": "wk's"}, {"input": "wq's"}, {"input": "wv's"}]
    named = _by_name(NAMES, states, parameters_behind(FSDP_TRACE, weights, NAMES))
    assert named == {"wq": {"input": "wq's"}, "wk": {"input": "wk's"}, "wv": {"input": "wv's"}}


def test_a_parameter_argument_is_its_own_name_and_an_unknown_producer_names_nothing() -> None:
    assert parameters_behind(_Trace(()), [_Proxy("t_wq_weight")], NAMES) == ["t_wq_weight"]
    packed = _Trace((_Symbol((_Proxy("a"), _Proxy("b")), (_Proxy("t9"),)),))  # a bucket's unpacking: two arguments
    assert parameters_behind(packed, [_Proxy("t9")], NAMES) == [None]


SHARED = ["first", "shared", "last"]
SHARED_CALLS = ["t_first_weight", "t_shared_weight", "t_shared_weight", "t_last_weight"]


def test_a_linear_called_twice_with_a_state_per_call_has_an_entry_per_call() -> None:
    """thunder's trace holds a TE linear per call: each call's own state is ``name@2`` on (the model of
    ``fp8-state-per-linear-call`` names its second call's module so: ``networks.SECOND_CALL``)."""
    from teparity.inrank.networks import SECOND_CALL

    states = [{"input": "first"}, {"input": "call 1"}, {"input": "call 2"}, {"input": "last"}]
    named = _by_name(SHARED, states, SHARED_CALLS, [1, 2, 3, 4])
    assert named == {"first": {"input": "first"}, "shared": {"input": "call 1"}, SECOND_CALL: {"input": "call 2"},
                     "last": {"input": "last"}}


def test_a_linear_called_twice_with_one_state_has_one_entry_as_eager_te() -> None:
    """Where both calls share one state object (as eager TE's module keeps), the snapshot is eager TE's layout."""
    states = [{"input": "first"}, {"input": "shared"}, {"input": "shared"}, {"input": "last"}]
    assert _by_name(SHARED, states, SHARED_CALLS, [1, 2, 2, 4]) == {
        "first": {"input": "first"}, "shared": {"input": "shared"}, "last": {"input": "last"}}


def test_more_states_than_linears_without_parameters_behind_them_cannot_be_named() -> None:
    import pytest

    with pytest.raises(AssertionError, match="found FP8 state for 4 TE linears, the network has 3"):
        _by_name(SHARED, [{"input": "x"}] * 4, [None] * 4)
