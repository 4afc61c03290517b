"""Numerics tier: thunder + a TE executor against eager TE in one process each, over several training
steps (forward, backward, SGD step): outputs, input/weight/bias gradients and the whole FP8 state.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from teparity.testing import Case, checks, fused_update_deviation, Pairs, PairSpec, recipes, state_is_empty

pytestmark = pytest.mark.fp8

#: Fixed cases: with and without bias, 2-D and 3-D input, fp32 and bf16 parameters, linears only
#: (FP8 state compared exactly) and GELU between three linears. GELU runs in fp32 only: in bf16,
#: thunder's GELU rounds differently from torch's kernel, FP8 quantization amplifies it, and by the
#: third SGD step weight gradients differ by up to 0.8 (H200, TE 2.9.0, legacy executor): a
#: difference of the activation, not of the TE executor (docs/results/h200-x2-te2.9.0-e392584-dev/tokens-x16/).
#: fp32 parameters with a bias have their own check (numerics-fp32-bias below): thunder's functional
#: executor cannot run them (known defect functional-fp32-bias-in-fp8-gemm), and a row of its own keeps
#: that defect from standing in for every other case.
FIXED_CASES = (
    Case(activation=None, bias=False),
    Case(bias=False, lead_shape=(2, 8), dtype="bfloat16", activation=None, seed=1),
    Case(lead_shape=(2, 8), dtype="bfloat16", activation=None, seed=3),
    Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(4, 8), seed=2),
)
FP32_BIAS_CASES = (
    Case(activation=None),
    Case(sizes=(48, 64, 32, 16), lead_shape=(4, 8), seed=2),
)
#: (parameter dtype, activation, bias) the drawn cases use: every kind of the fixed cases.
DRAWN_KINDS = [("float32", "gelu", False), ("float32", None, False), ("bfloat16", None, False), ("bfloat16", None, True)]

#: Shapes inside TE's FP8 constraints: features % 16 == 0 (utils.assert_dim_for_fp8_exec) and the
#: flattened leading size % 16 == 0 (the wgrad GEMM's leading dimension: "ret.lda % 16 == 0" in
#: cublaslt_gemm.cu, seen on TE 2.9.0 while drawn inputs could have 8 tokens); hypothesis adds one of
#: these to the fixed cases.
extra_cases = st.lists(
    st.tuples(
        st.lists(st.sampled_from([16, 32, 48, 64, 128]), min_size=2, max_size=4).map(tuple),
        st.sampled_from([(16,), (48,), (2, 8), (3, 16)]),
        st.sampled_from(DRAWN_KINDS),
        st.integers(10, 10_000),
    ).map(lambda t: Case(sizes=t[0], lead_shape=t[1], dtype=t[2][0], activation=t[2][1], bias=t[2][2], seed=t[3])),
    min_size=1,
    max_size=1,
)


@pytest.mark.parametrize("recipe_id", recipes.RECIPE_IDS)
@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check(checks.NUMERICS, "{recipe_id}")
@settings(max_examples=1, phases=(Phase.explicit, Phase.generate), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=extra_cases)
def test_thunder_matches_eager_te(executor: str, recipe_id: str, drawn: list[Case], parity: Pairs) -> None:
    _assert_numerics(PairSpec(executor, recipe_id, cases=FIXED_CASES + tuple(drawn), steps=3), parity)


@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check(checks.NUMERICS_FP32_BIAS)
def test_fp32_parameters_with_bias(executor: str, parity: Pairs) -> None:
    """fp32 parameters with a bias: cuBLASLt has no FP8 GEMM with an fp32 bias, so TE must not fuse it."""
    _assert_numerics(PairSpec(executor, "delayed", cases=FP32_BIAS_CASES, steps=3), parity)


def _assert_numerics(spec: PairSpec, parity: Pairs) -> None:
    __tracebackhide__ = True
    pair = parity.run(spec, measure_fused=True)
    result = parity.judge_against_te_or_model(pair, parity.assert_parity)
    stateless = " (recipe keeps no scaling state)" if state_is_empty(pair.eager) else ""
    parity.evidence(f"{len(spec.cases)} cases x {spec.steps} steps: {result.summary()}{stateless}{fused_update_deviation(pair)}")
