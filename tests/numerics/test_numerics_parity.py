"""Numerics tier: thunder + a TE executor against eager TE in one process each, over several training
steps (forward, backward, SGD step): outputs, input/weight/bias gradients and the whole FP8 state.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from teparity import recipes
from teparity.compare import state_is_empty
from teparity.parity import Case, SideSpec
from teparity.paritychecks import assert_parity, context, fused_update_deviation, run_pair

pytestmark = pytest.mark.fp8

#: Fixed cases: with and without bias, 2-D and 3-D input, fp32 and bf16 parameters, linears only
#: (FP8 state compared exactly) and GELU between three linears. GELU runs in fp32 only: in bf16,
#: thunder's GELU rounds differently from torch's kernel, FP8 quantization amplifies it, and by the
#: third SGD step weight gradients differ by up to 0.8 (H200, TE 2.9.0, legacy executor): a
#: difference of the activation, not of the TE executor (docs/results/h200-x2-te2.9.0-dev-runs/).
FIXED_CASES = (
    Case(activation=None),
    Case(bias=False, lead_shape=(2, 8), dtype="bfloat16", activation=None, seed=1),
    Case(sizes=(48, 64, 32, 16), lead_shape=(4, 8), seed=2),
)
#: (parameter dtype, activation) pairs the drawn cases use.
DTYPE_ACTIVATION = [("float32", "gelu"), ("float32", None), ("bfloat16", None)]

#: Shapes inside TE's FP8 constraints: features % 16 == 0 (utils.assert_dim_for_fp8_exec) and the
#: flattened leading size % 16 == 0 (the wgrad GEMM's leading dimension: "ret.lda % 16 == 0" in
#: cublaslt_gemm.cu, seen on TE 2.9.0 while drawn inputs could have 8 tokens); hypothesis adds one of
#: these to the fixed cases.
extra_cases = st.lists(
    st.tuples(
        st.lists(st.sampled_from([16, 32, 48, 64, 128]), min_size=2, max_size=4).map(tuple),
        st.booleans(),
        st.sampled_from([(16,), (48,), (2, 8), (3, 16)]),
        st.sampled_from(DTYPE_ACTIVATION),
        st.integers(10, 10_000),
    ).map(lambda t: Case(sizes=t[0], bias=t[1], lead_shape=t[2], dtype=t[3][0], activation=t[3][1], seed=t[4])),
    min_size=1,
    max_size=1,
)


@pytest.mark.parametrize("recipe_id", recipes.RECIPE_IDS)
@pytest.mark.parametrize("executor", ["legacy", "functional"])
@pytest.mark.check("numerics[{recipe_id}]")
@settings(max_examples=1, phases=(Phase.explicit, Phase.generate), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=extra_cases)
def test_thunder_matches_eager_te(
    executor: str, recipe_id: str, drawn: list[Case], teparity_env: Any, rank_runner: Any, evidence: Any
) -> None:
    if reason := teparity_env.executor_reason(executor) or recipes.unsupported_reason(recipe_id, executor):
        pytest.skip(reason)
    spec = SideSpec("eager", executor, recipe_id, cases=FIXED_CASES + tuple(drawn), steps=3)
    pair = run_pair(rank_runner, spec, 1, measure_fused=True)
    ctx = context(teparity_env, pair.spec, 1, "gloo")

    result = assert_parity(pair.eager, pair.thunder, pair.spec, ctx)
    stateless = " (recipe keeps no scaling state)" if state_is_empty(pair.eager) else ""
    evidence(f"{len(spec.cases)} cases x {spec.steps} steps: {result.summary()}{stateless}{fused_update_deviation(pair)}")
