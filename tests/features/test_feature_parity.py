"""Features tier: what an executor PR can break beyond plain training of linears, each held to eager TE
by the numerics tier's rules (TE claims every linear, trace invariants, outputs and gradients every
step, FP8 state): activation checkpointing, thunder's torch.compile path (thunderfx), recipe changes
between steps, the no-grad forward, ``torch.autocast``, a llama-style block, and the combinations users train with:
resuming from a checkpoint, a new input shape between steps, a frozen base linear with a trainable adapter, a
linear called twice in one forward, FP8 turned off by step or for some layers, and thunder's CUDA graph transform; and
thunder's 8-bit inference against its eager model.

The eager side is the program without the feature where the feature must not change the numbers
(checkpointing recomputes, it must not change what is computed), and the same program otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from teparity.testing import (
    COMPILE_PATHS,
    TE_MODULE_NETWORKS,
    Case,
    TeModulesSpec,
    ThunderRunRaised,
    checks,
    fused_update_deviation,
    Inference8BitSpec,
    inference8bit_run,
    Pairs,
    PairSpec,
    QUANTIZED_LINEAR,
    reasons,
    StrategyRanks,
    reference,
    te_modules_run,
)

pytestmark = pytest.mark.fp8
EXECUTORS = ["legacy", "functional"]
#: Linears only (bitwise for the functional executor), 2-D and 3-D, fp32 and bf16, three linears.
CASES = (
    Case(activation=None, bias=False),
    Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(2, 8), dtype="bfloat16", activation=None, seed=1),
)
#: Activation checkpointing: a region whose linears the backward recomputes. Linears only (bitwise; the
#: region's first linear feeds its second, so it is recomputed) and GELUs between the linears (every
#: region linear recomputed); fp32, as the numerics tier runs GELU.
CHECKPOINT_CASES = (
    Case(sizes=(48, 64, 32, 16), bias=False, activation=None),
    Case(sizes=(48, 64, 32, 16), bias=False, lead_shape=(2, 8), seed=2),
)
#: A llama-style block in fp32 (no bias: llama has none), batch 2 x sequence 16.
LLAMA = (Case(sizes=(64, 128, 64), lead_shape=(2, 16), dtype="float32", architecture="llama", seed=4),)
#: Two steps: thunder's RMSNorm, softmax and SiLU round apart from torch's by ulps, and FP8 (E5M2
#: gradients) amplifies that as the weights part: on thunder 0.2.5's legacy executor with TE 2.9.0, steps
#: 0 and 1 agree within 1.1e-5 and step 2 has 2 of 4096 wq-gradient entries 0.93 apart
#: (docs/results/h200-te2.9.0-65ae0b1-features/).
LLAMA_STEPS = 2


def _assert_feature(spec: PairSpec, parity: Pairs, what: str) -> None:
    __tracebackhide__ = True
    pair = parity.run(spec, measure_fused=True)
    result = parity.judge_against_te_or_model(pair, parity.assert_parity)
    parity.evidence(f"{what}; {len(spec.cases)} cases x {spec.steps} steps: {result.summary()}{fused_update_deviation(pair)}")


#: The default recipe and one whose short history (4) rolls over within the run, in E4M3 both ways.
RECIPE_PAIR = ["delayed", "delayed-e4m3-len4-max"]


@pytest.mark.parametrize("recipe_id", RECIPE_PAIR)
@pytest.mark.parametrize("compile_path", ["jit", "thunderfx"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.ACTIVATION_CHECKPOINTING, "{compile_path}-{recipe_id}")
def test_activation_checkpointing_matches_eager_te(executor: str, compile_path: str, recipe_id: str, parity: Pairs) -> None:
    """``torch.utils.checkpoint`` (non-reentrant) around every layer but the last: the backward recomputes
    those linears with the forward's FP8 state, each state is updated once per step, and the numbers are
    eager TE's without checkpointing."""
    spec = PairSpec(executor, recipe_id, CHECKPOINT_CASES, steps=3, checkpoint=True, compile_path=compile_path)
    _assert_feature(spec, parity, f"checkpointed linears recomputed in the backward ({compile_path})")


@pytest.mark.parametrize("recipe_id", RECIPE_PAIR)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.THUNDERFX, "{recipe_id}")
def test_thunderfx_matches_eager_te(executor: str, recipe_id: str, parity: Pairs) -> None:
    """thunder as torch.compile's backend (``thunder.dynamo.thunderfx``) instead of ``thunder.jit``."""
    _assert_feature(PairSpec(executor, recipe_id, CASES, steps=3, compile_path="thunderfx"), parity, "thunderfx")


#: Recipe changes: (recipe ids used in turn, a new object each step). "alternate" goes to a recipe of
#: another margin and back to the very same object; "rebuilt" builds an equal recipe every step, as a
#: loop that writes ``te.autocast(recipe=DelayedScaling())`` inline does. (Alternating with a recipe of
#: another history length and format made eager TE itself raise on its Python scale update, the
#: functional executor's reference: docs/facts.md.)
RECIPE_CHANGES = {
    "alternate": (("delayed", "delayed-margin1"), False),
    "rebuilt": (("delayed",), True),
    #: DelayedScaling, then Float8CurrentScaling, then back to the first object: another recipe type, one program.
    "type": (("delayed", "current"), False),
}


@pytest.mark.parametrize("change", list(RECIPE_CHANGES))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.RECIPE_CHANGE, "{change}")
def test_recipe_changes_between_steps_match_eager_te(executor: str, change: str, parity: Pairs) -> None:
    """Eager TE keeps one FP8 state per module across DelayedScaling recipes (module/base.py
    ``set_meta_tensor`` adjusts the amax history length; an equal recipe changes nothing): thunder must
    carry the state the same way."""
    ids, rebuilt = RECIPE_CHANGES[change]
    spec = PairSpec(executor, ids[0], CASES, steps=4, recipe_ids_by_step=ids, new_recipe_each_step=rebuilt)
    _assert_feature(spec, parity, f"recipes by step {list(ids) * (4 // len(ids))}{', a new object each step' if rebuilt else ''}")


@pytest.mark.parametrize("recipe_id", ["delayed", "delayed-e4m3-len4-max"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.INFERENCE, "{recipe_id}")
def test_no_grad_forward_matches_eager_te(executor: str, recipe_id: str, parity: Pairs) -> None:
    """Forward passes under ``torch.no_grad`` (inference): outputs and the forward FP8 state every pass."""
    _assert_feature(PairSpec(executor, recipe_id, CASES, steps=3, train=False), parity, "no-grad forward passes")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.TORCH_AUTOCAST)
def test_training_under_torch_autocast_matches_eager_te(executor: str, parity: Pairs) -> None:
    """fp32 parameters, the forward under ``torch.autocast(dtype=torch.bfloat16)``."""
    spec = PairSpec(executor, "delayed", CASES[:1], steps=3, torch_autocast="bfloat16")
    _assert_feature(spec, parity, "training steps under torch.autocast(bfloat16)")


@pytest.mark.parametrize("recipe_id", RECIPE_PAIR)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.LLAMA_BLOCK, "{recipe_id}")
def test_llama_block_matches_eager_te(executor: str, recipe_id: str, parity: Pairs) -> None:
    """A llama-style block, every projection TE-claimed, against the block with ``te.Linear`` projections."""
    _assert_feature(PairSpec(executor, recipe_id, LLAMA, steps=LLAMA_STEPS), parity, "llama block")


#: Where a resumed run goes on: compiled again by thunder, or in eager TE (thunder's checkpoint loaded into te.Linear).
RESUME_INTO = ["thunder", "eager"]


@pytest.mark.parametrize("resume_into", RESUME_INTO)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.CHECKPOINT_RESUME, "{resume_into}")
def test_resume_from_checkpoint_matches_eager_te(executor: str, resume_into: str, parity: Pairs) -> None:
    """3 steps, ``state_dict()``, a freshly built network loads it (and is compiled again, or is eager TE), 3 more steps:
    against eager TE's own resumed run, which is its uninterrupted one (TE keeps its FP8 state in ``_extra_state``)."""
    spec = PairSpec(executor, "delayed", CASES[:1], steps=6, resume_into=resume_into)
    _assert_feature(spec, parity, f"resumed from a checkpoint into {resume_into} after 3 of 6 steps")


#: Input shapes by step: a sequence length that changes and comes back; a short last batch. Each new shape is a new
#: thunder cache entry (its own FP8 state); eager TE keeps one state per module.
SHAPE_SCHEDULES = {
    "sequence-length": ((2, 16), (2, 32), (2, 16), (2, 32)),
    "short-last-batch": ((32,), (32,), (16,)),
}
#: thunder.jit's cache option: its default, and one entry for every shape where the build has it.
CACHES = {"default": None, "symbolic-values": "symbolic values"}


@pytest.mark.parametrize("cache", list(CACHES))
@pytest.mark.parametrize("schedule", list(SHAPE_SCHEDULES))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.NEW_INPUT_SHAPE, "{schedule}-{cache}")
def test_new_input_shape_between_steps_matches_eager_te(executor: str, schedule: str, cache: str, parity: Pairs) -> None:
    """The input's shape changes between steps (linears only, fp32)."""
    shapes = SHAPE_SCHEDULES[schedule]
    case = Case(activation=None, bias=False, lead_shape=shapes[0])
    spec = PairSpec(executor, "delayed", (case,), steps=len(shapes), lead_shapes_by_step=shapes, cache=CACHES[cache])
    _assert_feature(spec, parity, f"input shapes by step {list(shapes)}, cache {cache}")


#: A bf16 frozen base linear (input 48, output 64) with a rank-16 adapter and a frozen head (16), the fp32 input cast.
ADAPTER = (Case(sizes=(48, 64, 16), lead_shape=(2, 8), dtype="bfloat16", architecture="adapter", seed=5),)
#: The parameters that train in ``ADAPTER``: only they have gradients, on both sides.
ADAPTER_TRAINED = ("down.weight", "up.weight")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FROZEN_BASE_ADAPTER)
def test_frozen_base_with_adapter_matches_eager_te(executor: str, parity: Pairs) -> None:
    """Frozen weights (``requires_grad=False``) beside a trainable low-rank adapter: the adapter's and the input's
    gradients and the backward FP8 state as eager TE's, and no gradient for a frozen weight on either side."""
    spec = PairSpec(executor, "delayed", ADAPTER, steps=3)
    pair = parity.run(spec, measure_fused=True)
    for side, runs in (("eager TE", pair.eager), ("thunder", pair.thunder)):
        graded = {tuple(sorted(step.param_grads)) for run in runs[0] if run.error is None for step in run.steps}
        assert graded <= {ADAPTER_TRAINED}, f"{side} has gradients for {sorted(graded)}; only {ADAPTER_TRAINED} train"
    result = parity.judge_against_te_or_model(pair, parity.assert_parity)
    parity.evidence(f"frozen base and head, trained adapter; 3 steps: {result.summary()}{fused_update_deviation(pair)}")


#: Three linears, the middle one (64 x 64) called twice per forward; linears only, fp32.
SHARED = (Case(sizes=(32, 64, 16), lead_shape=(16,), architecture="shared", seed=6),)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.LINEAR_CALLED_TWICE)
def test_linear_called_twice_matches_eager_te(executor: str, parity: Pairs) -> None:
    """One linear called twice in a forward (shared weights): eager TE keeps one FP8 state for the module."""
    _assert_feature(PairSpec(executor, "delayed", SHARED, steps=3), parity, "a linear called twice per forward")


#: 8-bit inference in the model's dtype: bfloat16 and float32.
INFERENCE_DTYPES = ["bfloat16", "float32"]


@pytest.mark.parametrize("dtype", INFERENCE_DTYPES)
@pytest.mark.check(checks.INFERENCE_8BIT, "{dtype}")
def test_8bit_inference_matches_its_eager_model(dtype: str, teparity_env: Any, ranks: StrategyRanks, evidence: Any) -> None:
    """thunder's ``TEInference8BitTransform`` (weights stored in E4M3, each linear ``te_linear_fp8``) against its eager
    model from TE's parts (``teparity.inrank.inference8bit``): every linear quantized, every output bitwise."""
    if reason := reasons.no_8bit_inference(teparity_env):
        pytest.skip(reason)
    spec = Inference8BitSpec(dtype=dtype)
    ctx = f"{teparity_env.versions.describe()}; 8-bit inference, {dtype}, {spec.passes} no-grad passes, sizes {spec.sizes}"
    thunder, model = ranks.side_by_side([(inference8bit_run, (spec,)), reference(inference8bit_run, dataclasses.replace(spec, side="model"))])
    for side, runs in (("thunder", thunder), ("the eager model", model)):
        if runs[0].error is not None:
            pytest.fail(f"{side} raised: {runs[0].error}; {ctx}", pytrace=False)
    linears = len(spec.sizes) - 1
    if (claimed := thunder[0].symbols.count(QUANTIZED_LINEAR)) != linears:
        pytest.fail(f"{claimed} of {linears} linears ran as {QUANTIZED_LINEAR}; trace symbols {sorted(set(thunder[0].symbols))}; {ctx}",
                    pytrace=False)
    import torch

    parted = []
    for step, (ours, theirs) in enumerate(zip(thunder[0].outputs, model[0].outputs)):
        try:
            torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        except AssertionError as error:
            parted.append(f"pass {step}: {error}")
    if parted:
        pytest.fail(f"thunder's 8-bit inference parts from its eager model: {'; '.join(parted)}; {ctx}", pytrace=False)
    evidence(f"{linears} quantized linears, {spec.passes} passes x {spec.sizes[0]}->{spec.sizes[-1]} bitwise equal to the model")


#: FP8 by step (``teparity.records.FP8_MODES``) and the evaluation steps: turned off, no autocast at all, a warm-up
#: without FP8, one evaluation forward without FP8 between FP8 steps. FP8 state compared after every step (an
#: evaluation step's: its forward roles).
FP8_SCHEDULES = {
    "off": (("off",), ()),
    "no-autocast": (("none",), ()),
    "warm-up": (("off", "off", "on", "on"), ()),
    "evaluation-between": (("on", "on", "off", "on"), (2,)),
}


@pytest.mark.parametrize("schedule", list(FP8_SCHEDULES))
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FP8_SWITCHED, "{schedule}")
def test_fp8_switched_by_step_matches_eager_te(executor: str, schedule: str, parity: Pairs) -> None:
    """The training loop turns FP8 on and off around the compiled program, as around eager ``te.Linear`` modules."""
    modes, evaluations = FP8_SCHEDULES[schedule]
    spec = PairSpec(executor, "delayed", CASES[:1], steps=4, fp8_by_step=modes, eval_steps=evaluations)
    _assert_feature(spec, parity, f"FP8 by step {list(modes)}, evaluation forwards at {list(evaluations)}")


#: Linears only, fp32, the first and last under ``te.autocast(enabled=False)`` inside the FP8 region.
FP8_OFF_ENDS = (Case(sizes=(32, 64, 64, 16), lead_shape=(16,), architecture="fp8-off-ends", seed=7),)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.FP8_OFF_ENDS)
def test_layers_kept_out_of_fp8_match_eager_te(executor: str, parity: Pairs) -> None:
    """A forward that keeps its first and last linears out of FP8 (``networks.Fp8OffEnds``): those in high precision,
    the middle one in FP8, as eager TE runs them."""
    _assert_feature(PairSpec(executor, "delayed", FP8_OFF_ENDS, steps=3), parity, "first and last linears out of FP8")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.check(checks.CUDA_GRAPHS)
def test_cuda_graphs_match_eager_te(executor: str, parity: Pairs) -> None:
    """thunder's CUDA graph transform over the TE program, against eager TE without graphs: every replay must update
    the FP8 state and read the step's recipe as a run without graphs does."""
    _assert_feature(PairSpec(executor, "delayed", CASES[:1], steps=4, cuda_graphs=True), parity, "CUDA graphs")


@pytest.mark.parametrize("network", TE_MODULE_NETWORKS)
@pytest.mark.parametrize("compile_path", COMPILE_PATHS)
@pytest.mark.check(checks.TE_MODULES, "{compile_path}-{network}")
def test_te_module_networks_match_eager_te(compile_path: str, network: str, teparity_env: Any, ranks: StrategyRanks,
                                           evidence: Any) -> None:
    """A network of TE's own modules (``teparity.inrank.te_modules``) compiled by thunder, against the same modules run
    eagerly: every step's output, parameters and TE FP8 state bitwise. Where thunder raises, eager TE must still run
    in that process: a failed trace must not leave TE's global FP8 state broken."""
    import torch

    if reason := reasons.no_thunder(teparity_env) or reasons.no_fp8(teparity_env) or reasons.feature_absent(None, teparity_env.versions.thunder, recipe_changes=False,
                                                                         compile_path=compile_path):
        pytest.skip(reason)
    spec = TeModulesSpec(compile_path=compile_path, network=network)
    ctx = f"{teparity_env.versions.describe()}; {network} of TE modules under {compile_path}, {spec.steps} steps"
    thunder, eager = ranks.side_by_side([(te_modules_run, (spec,)), reference(te_modules_run, dataclasses.replace(spec, side="eager"))])
    if eager[0].error is not None:
        pytest.fail(f"eager TE raised: {eager[0].error.traceback}; {ctx}", pytrace=False)
    if (raised := thunder[0].error) is not None:
        errors = [{"rank": 0, "error": f"{raised.type.rsplit('.', 1)[-1]}: {raised.message}\n{raised.traceback}"}]
        if thunder[0].eager_after is not None:
            errors.append({"rank": 0, "error": f"eager TE after the failed thunder trace, same process: {thunder[0].eager_after}"})
        where = "\n      ".join(raised.traceback.strip().splitlines()[-6:])  # where thunder's side raised it
        raise ThunderRunRaised(f"thunder raised; {ctx}\n" + "\n".join(e["error"].splitlines()[0] for e in errors)
                               + f"\n  thunder's side:\n      {where}", errors=errors)
    if not eager[0].states[-1]:
        pytest.fail(f"eager TE holds no FP8 state: nothing of FP8 compared; {ctx}", pytrace=False)
    parted = []
    for step, (ours, theirs) in enumerate(zip(thunder[0].outputs, eager[0].outputs)):
        for what, mine, expected in (("output", {"": ours}, {"": theirs}),
                                     ("parameter", thunder[0].parameters[step], eager[0].parameters[step]),
                                     ("FP8 state", thunder[0].states[step], eager[0].states[step])):
            if mine.keys() != expected.keys():
                parted.append(f"step {step} {what}: thunder has {sorted(mine)}, eager TE {sorted(expected)}")
                continue
            for name in mine:
                try:
                    torch.testing.assert_close(mine[name], expected[name], rtol=0, atol=0)
                except AssertionError as error:
                    parted.append(f"step {step} {what} {name}: {' '.join(str(error).split())[:300]}")
    if parted:
        pytest.fail(f"thunder parts from eager TE ({len(parted)}): {'; '.join(parted[:6])}; {ctx}", pytrace=False)
    evidence(f"{spec.steps} steps: outputs, {len(eager[0].parameters[0])} parameters and {len(eager[0].states[0])} FP8 state "
             "tensors bitwise equal to eager TE")
