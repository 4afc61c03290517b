"""A known defect's model, judged as ``Pairs.judge`` judges it (CPU, synthetic sides): a test a modeled entry covers
is known only where thunder fails against eager TE with the entry's signature and matches the model under the full
rules; one more difference anywhere (a look-alike of the defect) fails it as ``ModelParted``, which no entry matches;
a thunder that matches eager TE is the XPASS that retires the entry."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from teparity.gate.pairs import ModelParted, Pairs
from teparity.report.parity import MODEL_PROPERTY, NUMBERS_PROPERTY
from teparity.inrank import defect_models
from teparity.inrank.defect_models import tie_parameters
from teparity.judge.failures import PartedFromEager, SilentFallback
from teparity.known import registry
from teparity.known.registry import BY_ID
from teparity.known.defects.thunderfx_cannot_interpret_torch_2_12_fx_codegen import ENTRY as TORCH_2_12_THUNDERFX
from teparity.records import STATE_PER_CACHE_ENTRY, TORCH_LINEARS, Case, CaseRun, Pair, PairSpec, StepRecord
from teparity.stack.environment import Environment
from teparity.stack.executors import ExecutorInfo
from teparity.stack.versions import Versions
from teparity.trace_summary import SymbolRow, TraceSummary

NO_GRAD = BY_ID["no-grad-forward-left-to-torch"]
SPEC = PairSpec("legacy", "delayed", (Case(activation=None),), steps=2, train=False)
ENV = Environment(
    versions=Versions(torch="2.11.0", thunder="0.2.7.dev20260201", transformer_engine="2.20.2"), gpus=(),
    executors={kind: ExecutorInfo(kind, "m", "a", executor_present=True) for kind in ("legacy", "functional")},
    te_import_error=None, thunder_import_error=None,
)


def _trace(names: list[str], label: str) -> TraceSummary:
    return TraceSummary(label, tuple(SymbolRow(i, n, "return" if n == "python_return" else "other", n) for i, n in enumerate(names)))


def _run(output: float, *, te: bool) -> CaseRun:
    """A forward-only case run of the legacy executor: TE held its one linear (``te``) or torch did; FP8 state only
    where TE ran."""
    state = {"0": {"input": {"amax_history": torch.tensor([0.0, 1.5]), "scale": torch.tensor(448.0)}}} if te else {}
    step = StepRecord([torch.full((4, 4), output)], [None], {}, state, 0)
    forward = ["unpack_trivial", "te_linear_0" if te else "linear", "python_return"]
    return CaseRun(Case(activation=None), [step, copy.deepcopy(step)], ["0"], forward=_trace(forward, "rank 0 forward trace"),
                   legacy_autocast={"wrapped": True, "recipe_is_ours": True})


def _pair(thunder_output: float, *, thunder_te: bool = False) -> Pair:
    """Eager TE (FP8: 1.0), the model (torch: 1.001) and thunder."""
    return Pair(SPEC, 1, "gloo", "python", [[_run(1.0, te=True)]], [[_run(thunder_output, te=thunder_te)]],
                modeled=[[_run(1.001, te=False)]], model_spec=NO_GRAD.model.applied(SPEC))


def _judge(pair: Pair) -> tuple[list[tuple[str, object]], BaseException | None]:
    noted: list[tuple[str, object]] = []
    pairs = Pairs(ENV, None, "gloo", lambda said: None, NO_GRAD, lambda key, value: noted.append((key, value)))
    try:
        pairs.judge_against_te_or_model(pair, lambda judged: pairs.assert_parity(judged, "ctx"))
    except AssertionError as error:
        return noted, error
    return noted, None


def test_the_defect_and_nothing_else_is_known_with_its_model_passed() -> None:
    noted, error = _judge(_pair(1.001))
    assert isinstance(error, SilentFallback) and registry.match([NO_GRAD], error, ENV) is NO_GRAD, error
    model = dict(noted)[MODEL_PROPERTY]
    assert model["entry"] == NO_GRAD.id and model["modeled"] == "pass" and model["tensors_compared"] == 2, model
    assert model["allowed"] == {"output": "rtol 0.001 atol 1e-05"}, model


@pytest.mark.parametrize("off", [1.001 * 1.01, 1.001 + 2e-3])
def test_a_look_alike_with_one_more_difference_is_no_known_defect(off: float) -> None:
    """The same silent fallback (the signature alone matches it), with thunder's outputs off the model."""
    noted, error = _judge(_pair(off))
    assert isinstance(error, ModelParted), error
    assert registry.match(list(registry.REGISTRY), error, ENV) is None
    assert f"thunder differs from the model of known upstream defect {NO_GRAD.id}" in str(error)
    assert "output: Tensor-likes are not close" in str(error) and "against eager TE itself: " in str(error)
    assert MODEL_PROPERTY not in dict(noted)


def test_te_holding_a_linear_where_the_model_runs_torch_is_a_difference_from_the_model() -> None:
    """Where TE holds the linear again but the numbers are not eager TE's: neither the fix nor the defect."""
    _, error = _judge(_pair(1.001, thunder_te=True))
    assert isinstance(error, ModelParted) and "TE held 1 linear(s) where the reference runs every linear in torch" in str(error)


def test_a_thunder_that_matches_eager_te_passes_there_the_xpass_that_retires_the_entry() -> None:
    noted, error = _judge(Pair(SPEC, 1, "gloo", "python", [[_run(1.0, te=True)]], [[_run(1.0, te=True)]],
                               modeled=[[_run(1.001, te=False)]], model_spec=NO_GRAD.model.applied(SPEC)))
    assert error is None and MODEL_PROPERTY not in dict(noted)
    assert dict(noted)[NUMBERS_PROPERTY]["tensors_compared"] == 6  # 2 outputs, 2 x (amax history, scale)


def test_the_model_spec_is_the_eager_spec_changed_as_the_entry_says() -> None:
    assert NO_GRAD.model.applied(SPEC).model == TORCH_LINEARS and not NO_GRAD.model.te_claims
    group = BY_ID["functional-fp8-group-ignored"].model.applied(PairSpec("functional", "delayed", (), strategy="thunder-ddp", fp8_group_size=1))
    assert group.fp8_group_size is None and group.model is None


def test_every_behaviour_has_a_model_or_a_bounded_signature_or_is_named_here() -> None:
    """Each entry's test is held beyond its fingerprint: by a model, or by a signature that requires nothing else to
    differ or raise. UNMODELED names what is neither, and why."""
    unheld = {entry.id for entry in registry.REGISTRY if entry.model is None and not entry.signature.bounded}
    assert unheld == set(UNMODELED), unheld


#: Entries held by their signature alone, and why no model stands in for them yet.
UNMODELED = {
    "functional-checkpointing-updates-fp8-state-twice": "thunder 0.2.5 dev builds only: a model would recompute under "
    "FP8 and update the forward state again in the backward; no GPU run of those builds to validate it",
}


def test_tied_twins_train_one_set_of_parameters() -> None:
    first, second = torch.nn.Sequential(torch.nn.Linear(4, 4)), torch.nn.Sequential(torch.nn.Linear(4, 4))
    tie_parameters(first, second)
    assert all(a is b for a, b in zip(first.parameters(), second.parameters(), strict=True))
    second(torch.ones(2, 4)).sum().backward()
    assert first[0].weight.grad is not None


class _ScalingState:
    """What the twins' TE modules hold per direction (a ``RecipeState``'s tensors)."""

    def __init__(self) -> None:
        self.amax_history, self.scale = torch.zeros(4, 2), torch.ones(2)


def _twins_with_state(monkeypatch: pytest.MonkeyPatch, *, own_updates: bool) -> defect_models.StatePerCacheEntry:
    def twin_with_state(plain: torch.nn.Module) -> torch.nn.Module:  # CPU: the twins as torch modules
        twin = copy.deepcopy(plain)
        twin[0].fp8_meta = {"scaling_fwd": _ScalingState(), "scaling_bwd": _ScalingState()}
        return twin

    monkeypatch.setattr(defect_models, "te_twin", twin_with_state)
    return defect_models.StatePerCacheEntry(torch.nn.Sequential(torch.nn.Linear(4, 4)), own_updates=own_updates)


def _run_and_update_every_twin(model: defect_models.StatePerCacheEntry, amax: float, rows: int = 2) -> None:
    """A micro-batch (``rows`` input rows) of the twin of its cache entry, then TE's global update: every registered
    module's history rolls."""
    model(torch.ones(rows, 4))
    model.state_module()[0].fp8_meta["scaling_fwd"].amax_history[0] = amax
    for twin in model.twins:
        for state in twin[0].fp8_meta.values():
            state.amax_history.copy_(torch.roll(state.amax_history, -1, 0))
            state.amax_history[0] = 0


@pytest.mark.parametrize("own_updates", [True, False])
def test_a_twin_state_moves_only_when_it_runs_where_the_executor_owns_its_updates(monkeypatch: pytest.MonkeyPatch,
                                                                                  own_updates: bool) -> None:
    """The functional executor's states roll only when their trace runs; the legacy executor's TE modules roll at
    every TE update, as the twins do."""
    model = _twins_with_state(monkeypatch, own_updates=own_updates)
    for step in range(2):
        for synced, amax in ((False, 1.0 + step), (True, 10.0 + step)):
            model.choose(None, synced)
            _run_and_update_every_twin(model, amax)
    history = model.state_module()[0].fp8_meta["scaling_fwd"].amax_history[:, 0].tolist()
    # The synced twin ran at steps 0 and 1: its own two rolls, or four with the idle twin's runs.
    assert history == ([0.0, 0.0, 10.0, 11.0] if own_updates else [0.0, 10.0, 0.0, 11.0]), history
    assert len(model.twins) == 2


def test_an_input_shape_is_a_cache_entry_of_its_own_and_a_shape_seen_before_goes_back_to_its_state(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """thunder compiles an entry per input shape: shapes A, B, A, B give two twins, each entry's state its own runs'
    (restored before its next run where another entry's update rolled it)."""
    model, seen = _twins_with_state(monkeypatch, own_updates=True), []
    for rows, amax in ((2, 1.0), (4, 2.0), (2, 3.0), (4, 4.0)):
        model.choose(None, True)
        _run_and_update_every_twin(model, amax, rows=rows)
        seen.append(model.state_module()[0].fp8_meta["scaling_fwd"].amax_history[:, 0].tolist())
    assert len(model.twins) == 2 and model.state_module() is model.twins[1]
    assert seen[2:] == [[0.0, 0.0, 1.0, 3.0], [0.0, 0.0, 2.0, 4.0]], seen


_KEEPS = "GeluKeepingForwardTerms"


@pytest.mark.parametrize(("thunder", "compile_path", "activation", "recomputed", "checkpointed"), [
    ("0.2.6", "thunderfx", "gelu", 2, ["Linear", "GELU", "Linear", "GELU"]),
    ("0.2.5.dev20250706", "jit", "gelu", 2, ["Linear", "GELU", "Linear", _KEEPS]),
    ("0.2.6", "jit", None, 1, ["Linear"]),
    ("0.2.5.dev20250629", "jit", "gelu", 2, ["Linear", _KEEPS, "Linear", _KEEPS]),
    ("0.2.4", "thunderfx", "gelu", 2, ["Linear", _KEEPS, "Linear", _KEEPS]),
])
def test_the_recomputed_region_is_what_the_compile_path_recomputes(monkeypatch: pytest.MonkeyPatch, thunder: str,
                                                                   compile_path: str, activation: str | None,
                                                                   recomputed: int, checkpointed: list[str]) -> None:
    """thunder.jit keeps the region's last GELU's forward terms, thunderfx recomputes every GELU; before
    ``since.GELU_RECOMPUTED_SINCE`` both keep every region GELU's (seen in the backward traces: docs/results/cpu-gelu-remat)."""
    from teparity.inrank.networks import plain_mlp
    from teparity.stack import versions

    monkeypatch.setattr(versions, "build_version", lambda name: thunder)
    monkeypatch.setattr(defect_models, "te_twin", copy.deepcopy)  # CPU: the layers as torch modules
    plain = plain_mlp((48, 64, 32, 16), seed=0, device="cpu", dtype=torch.float32, bias=False, activation=activation)
    model = defect_models.eager_model(defect_models.RECOMPUTED_UNDER_FP8, plain, executor="legacy",
                                      compile_path=compile_path, recomputed=recomputed)
    assert [type(layer).__name__ for layer in model._checkpointed] == checkpointed
    assert all(gelu.recomputed_by_forward_cdf == (thunder < "0.2.5.dev20250706") for gelu in model._gelus)


class _Drifting(torch.nn.Module):
    """Adds its call count: the backward's recomputation sees another input than the forward did."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.calls


def test_the_jit_gelu_takes_its_cdf_and_density_from_the_forward_and_z_from_the_recomputation() -> None:
    """thunder.jit's GELU backward: ``g * (Phi(z_f) + z_r * phi(z_f))``; all-forward or all-recomputed terms fail."""
    import torch.utils.checkpoint

    x = torch.linspace(-2.0, 1.0, 7, dtype=torch.float64, requires_grad=True)
    region = torch.nn.Sequential(_Drifting(), defect_models.GeluKeepingForwardTerms())
    torch.utils.checkpoint.checkpoint(region, x, use_reentrant=False).backward(torch.ones_like(x))
    z_f, z_r = x.detach() + 1, x.detach() + 2
    normal = torch.distributions.Normal(0.0, 1.0)
    expected = normal.cdf(z_f) + z_r * normal.log_prob(z_f).exp()
    torch.testing.assert_close(x.grad, expected)


class _Squared(torch.nn.Module):
    """``x * x``: its backward takes the input it saw, which in a recomputation is the recomputed one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x


def test_before_the_gelu_remat_change_a_recomputed_gelu_is_the_recomputed_input_times_the_forward_cdf() -> None:
    """thunder before 0.2.5.dev20250706 recomputes a region GELU as ``z_r * Phi(z_f)`` (its forward cdf saved), so the
    next layer's backward sees that; the GELU's own backward is the kept-terms one. ``gelu(z_r)`` there fails."""
    import contextlib

    import torch.utils.checkpoint

    x = torch.linspace(-2.0, 1.0, 7, dtype=torch.float64, requires_grad=True)
    gelu = defect_models.GeluKeepingForwardTerms(recomputed_by_forward_cdf=True)
    region = torch.nn.Sequential(_Drifting(), gelu, _Squared())

    @contextlib.contextmanager
    def recomputing() -> Any:
        gelu.recomputing = True
        try:
            yield
        finally:
            gelu.recomputing = False

    torch.utils.checkpoint.checkpoint(region, x, use_reentrant=False,
                                      context_fn=lambda: (contextlib.nullcontext(), recomputing())).backward(torch.ones_like(x))
    z_f, z_r = x.detach() + 1, x.detach() + 2
    normal = torch.distributions.Normal(0.0, 1.0)
    y_r = z_r * normal.cdf(z_f)
    expected = 2 * y_r * (normal.cdf(z_f) + z_r * normal.log_prob(z_f).exp())
    torch.testing.assert_close(x.grad, expected)


@pytest.mark.parametrize(("thunder", "theirs"), [("0.2.5", True), ("0.2.6.dev20251012", True), ("0.2.6.dev20251019", False),
                                                 ("0.2.6", False)])
def test_a_model_of_the_llama_block_computes_silu_as_the_installed_thunder_does(
        thunder: str, theirs: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before thunder had SiLU's gradient rule, a model's llama block runs thunder's decomposition (its ulps are what
    FP8 amplified on 0.2.5); from then on torch's kernel, as eager TE."""
    import torch

    from teparity.inrank import defect_models, networks
    from teparity.stack import versions

    monkeypatch.setattr(versions, "build_version", lambda name: thunder)
    block = networks.llama_block((64, 128, 64), seed=0)
    defect_models.eager_model(TORCH_LINEARS, block, executor="functional")
    assert (block.silu is defect_models.thunder_silu) == theirs
    assert block.silu is defect_models.thunder_silu or block.silu is torch.nn.functional.silu


def test_thunders_silu_is_silu_and_its_gradient() -> None:
    import torch

    from teparity.inrank.defect_models import thunder_silu

    a = torch.randn(4096, dtype=torch.float64, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    g = torch.randn(4096, dtype=torch.float64)
    thunder_silu(a).backward(g)
    torch.nn.functional.silu(b).backward(g)
    torch.testing.assert_close(thunder_silu(a.detach()), torch.nn.functional.silu(b.detach()))
    torch.testing.assert_close(a.grad, b.grad)


def test_each_thunderfx_case_is_compiled_as_its_own_program() -> None:
    """A second case of another shape through thunderfx compiles with static sizes, as the case would alone: without a
    Dynamo reset the same forward recompiles with symbolic sizes (SymInt inputs), where thunder up to
    0.2.3.dev20250518 loses a checkpointed region's gradients."""
    from teparity.inrank import networks, program
    from teparity.records import Case, PairSpec

    spec = PairSpec("functional", "delayed", (Case(activation=None),), steps=1, compile_path="thunderfx", checkpoint=True)

    def inputs_of_a_compile(sizes: tuple[int, ...], activation: str | None, lead: tuple[int, ...]) -> list[str]:
        compiled = program.compile_thunder(networks.CheckpointedMLP(*networks.plain_mlp(sizes, activation=activation)), {}, spec)
        compiled(torch.randn(*lead, sizes[0], requires_grad=True)).sum().backward()
        return [type(node.meta.get("example_value")).__name__ for info in compiled._backend.subgraph_infos
                for node in info.original_graph_module.graph.nodes if node.op == "placeholder"]

    if TORCH_2_12_THUNDERFX.holds_here():
        with pytest.raises(Exception, match="MappingKeysView|attribute nodes of Graph object out of sync"):
            inputs_of_a_compile((48, 64, 32, 16), None, (16,))
        pytest.skip(f"thunderfx cannot compile here: known defect {TORCH_2_12_THUNDERFX.id} (its first call raised, as the entry says)")
    inputs_of_a_compile((48, 64, 32, 16), None, (16,))
    assert "SymInt" not in inputs_of_a_compile((48, 64, 32, 16), "gelu", (2, 8))


def test_defects_that_cover_one_test_together_are_modeled_together() -> None:
    """Two FP8-state defects in one test (0.2.3's functional executor under grad accumulation: no cross-rank reduction and
    a state per cache entry) make one model with both changes; a model where torch runs every linear stands alone; two
    models that change one field apart are a registry error."""
    from teparity.known.defect import modeling
    from teparity.known import models
    from teparity.known.defect import combined

    entries = registry.BY_ID
    together = modeling([entries["grad-accumulation-fp8-state-per-cache-entry"], entries["functional-amax-not-reduced-across-ranks"]])
    assert together.id == "grad-accumulation-fp8-state-per-cache-entry + functional-amax-not-reduced-across-ranks"
    assert dict(together.model.spec_change) == {"model": STATE_PER_CACHE_ENTRY, "fp8_group_size": 1}
    alone = modeling([entries["legacy-executor-loses-te-from-te-2.10"], entries["grad-accumulation-fp8-state-per-cache-entry"]])
    assert alone is entries["legacy-executor-loses-te-from-te-2.10"]
    assert modeling([entries["no-grad-forward-left-to-torch"]]) is entries["no-grad-forward-left-to-torch"]
    with pytest.raises(ValueError, match="disagree on model"):
        combined([models.STATE_PER_ENTRY, models.FRESH_STATE_PER_RECIPE])


def _judge_raised(thunder_te: bool, verdict: Any = None) -> tuple[list[Any], BaseException]:
    """Judge a pair whose thunder side raised in its one case; the models each verdict ran against, and the failure."""
    ran: list[Any] = []
    pairs = Pairs(ENV, None, "gloo", lambda said: None, NO_GRAD, lambda key, value: None)

    def recorded(pair: Pair) -> Any:
        ran.append(pair.spec.model)
        return (verdict or (lambda judged: pairs.assert_parity(judged, "ctx")))(pair)

    raised = _pair(1.001, thunder_te=thunder_te)
    raised.thunder[0][0].error = "ValueError: not enough values to unpack\n  File \"x\", line 1, in backward_fn"
    with pytest.raises(AssertionError) as caught:
        pairs.judge_against_te_or_model(raised, recorded)
    return ran, caught.value


def test_a_thunder_side_raise_that_the_reference_shows_goes_to_the_registry_unmodeled() -> None:
    """A model predicts numbers, not a raise: where thunder raised and the true reference's failure lists it, that
    failure goes to the registry (a bounded signature, or a failure), and the model is not run."""
    ran, error = _judge_raised(thunder_te=True)
    assert ran == [SPEC.model]
    assert isinstance(error, PartedFromEager) and error.evidence["case_errors"][0]["side"] == "thunder", error
    assert "against the model" not in str(error)


def test_a_thunder_side_raise_that_an_earlier_check_hid_is_shown_by_the_model() -> None:
    """Where an earlier check of the true reference (here TE's claim, which the defect breaks) hid the raise, the
    failure that goes to the registry is the model's, which waives that check and lists the raise: the raise is never
    known under a signature that does not see it."""
    ran, error = _judge_raised(thunder_te=False)
    assert ran == [SPEC.model, TORCH_LINEARS]
    assert isinstance(error, PartedFromEager) and error.evidence["case_errors"], error
    assert f"against the model of {NO_GRAD.id}" in str(error)
    assert registry.match([NO_GRAD], error, ENV) is None


def test_a_thunder_side_raise_that_the_model_hides_too_parts_from_the_model() -> None:
    def hiding(pair: Pair) -> None:
        raise AssertionError("an invariant broken before the cases were compared")

    ran, error = _judge_raised(thunder_te=False, verdict=hiding)
    assert ran == [SPEC.model, TORCH_LINEARS] and isinstance(error, ModelParted), error


def test_the_no_sync_stash_model_accumulates_each_linears_input_grad_as_its_weight_grad() -> None:
    """In a micro-batch without the reduction, a linear whose input requires grad gains that input's gradient where its
    weight's belongs (thunder's FSDP stash before 0.2.4.dev20250608 with the functional executor); the first linear,
    whose input needs none, and every reduced micro-batch accumulate their own."""
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(3, 6, dtype=torch.float64), torch.nn.Linear(6, 4, dtype=torch.float64))
    reference = copy.deepcopy(plain)
    stash = defect_models.InputGradAsWeightGrad(plain)
    own: list[dict[str, torch.Tensor]] = []  # each micro-batch's true gradients, and linear 1's input gradient
    for micro in range(2):
        x, g = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 4, dtype=torch.float64)
        stash.choose(synced=micro == 1)
        plain(x).backward(g)
        reference.zero_grad(set_to_none=True)
        hidden = reference[0](x)
        hidden.retain_grad()
        reference[1](hidden).backward(g)
        own.append({**{n: p.grad.clone() for n, p in reference.named_parameters()}, "input of 1": hidden.grad})
    torch.testing.assert_close(plain[0].weight.grad, own[0]["0.weight"] + own[1]["0.weight"])
    torch.testing.assert_close(plain[1].weight.grad, own[0]["input of 1"] + own[1]["1.weight"])
    torch.testing.assert_close(plain[1].bias.grad, own[0]["1.bias"] + own[1]["1.bias"])


def test_the_linears_of_an_architecture_are_found_and_named_at_any_depth() -> None:
    """A nested network's FP8 state is keyed by each linear's full name, not its direct children's alone."""
    from teparity.inrank.networks import linear_names

    nested = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()), torch.nn.Linear(8, 4))
    assert linear_names(nested) == ["0.0", "1"]
