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
