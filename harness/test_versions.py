"""versions: thunder's TE executors are found where docs/facts.md says, and every "cannot" says why."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from teparity.report.table import unwrapped
from teparity.stack import reasons
from teparity.stack.environment import Environment, GpuInfo
from teparity.stack.envprobe import COMPILER_MODULES, ForkCheck, environment, fork_stages, fork_verdict
from teparity.stack.executors import ExecutorInfo, find_te_executors
from teparity.stack.versions import Versions, installed_version

THUNDER = Version(installed_version("lightning-thunder") or "0")


def _expected_modules(thunder: Version) -> dict[str, str | None]:
    """docs/facts.md's table, written out independently of versions.py's probing."""
    if thunder >= Version("0.2.7.dev20251130"):
        return {"legacy": None, "functional": "thunder.executors.transformer_engineex"}
    if thunder >= Version("0.2.6.dev0"):
        return {"legacy": "thunder.executors.transformer_engine_v1ex", "functional": "thunder.executors.transformer_engineex"}
    if thunder >= Version("0.2.3"):
        return {"legacy": "thunder.executors.transformer_engineex", "functional": "thunder.executors.transformer_engine_v2ex"}
    return {"legacy": "thunder.executors.transformer_engineex", "functional": None}


def test_executors_are_found_where_this_thunder_keeps_them() -> None:
    found = find_te_executors()
    expected = _expected_modules(THUNDER)
    assert {kind: info.module for kind, info in found.items()} == expected, f"thunder {THUNDER}"
    for kind, info in found.items():
        assert (info.missing_reason is None) == (expected[kind] is not None)
        if info.missing_reason:
            assert str(THUNDER) in info.missing_reason


@pytest.mark.skipif(THUNDER < Version("0.2.0.dev20240519") or THUNDER >= Version("0.2.7.dev20251130"),
                    reason=f"thunder {THUNDER} has no legacy backward sync to find")
def test_the_legacy_backward_sync_is_found() -> None:
    assert find_te_executors()["legacy"].has_backward_sync


def test_the_probe_matches_an_in_process_reading() -> None:
    env = environment()
    assert env.versions == Versions.installed()
    assert env.executors == find_te_executors()
    assert env.te_import_error is None or env.versions.transformer_engine is not None


def test_plugin_import_loads_no_torch_thunder_or_te() -> None:
    code = "import sys, teparity.plugin; print(sorted(m for m in ('torch', 'thunder', 'transformer_engine') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _env(gpus: tuple[GpuInfo, ...] = (), te: str | None = None, te_error: str | None = None,
         thunder: str = "0.2.6", executors: dict | None = None) -> Environment:
    return Environment(
        versions=Versions(torch="2.11.0", thunder=thunder, transformer_engine=te),
        gpus=gpus,
        executors=executors or {
            "legacy": ExecutorInfo("legacy", "m", "a", has_backward_sync=True, executor_present=True),
            "functional": ExecutorInfo("functional", missing_reason="lightning-thunder 0.2.2 has none: because"),
        },
        te_import_error=te_error,
        thunder_import_error=None,
    )


H200 = GpuInfo("NVIDIA H200", (9, 0))
A100 = GpuInfo("NVIDIA A100", (8, 0))


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        (_env(), "TransformerEngine is not installed"),
        (_env(te="2.9.0", te_error="OSError: libcuda.so.1"), "TransformerEngine 2.9.0 fails to import: OSError: libcuda.so.1"),
        (_env(te="2.9.0"), "no CUDA GPU visible (FP8 needs sm_89+)"),
        (_env(te="2.9.0", gpus=(A100,)), "no FP8-capable GPU (need sm_89+; found NVIDIA A100 (sm_80))"),
        (_env(te="2.9.0", gpus=(H200,)), None),
    ],
)
def test_fp8_reasons(env: Environment, reason: str | None) -> None:
    got = reasons.no_fp8(env)
    assert got == reason if reason is None else reason in (got or ""), got


def test_executor_and_gpu_count_reasons() -> None:
    env = _env(gpus=(H200,))
    assert reasons.no_executor(env, "legacy") is None
    assert reasons.no_executor(env, "functional") == "lightning-thunder 0.2.2 has none: because"
    assert reasons.too_few_gpus(env, 1) is None
    assert reasons.too_few_gpus(env, 2) == "needs 2 GPUs, 1 visible"
    no_sync = _env(executors={"legacy": ExecutorInfo("legacy", "m", "a"), "functional": ExecutorInfo("functional", "m", "a")})
    assert "has no te_sync_fp8_meta_bwd (added 2024-05-13, thunder PR #379)" in reasons.no_backward_sync(no_sync)


ADA = GpuInfo("NVIDIA L40S", (8, 9))


@pytest.mark.parametrize(
    ("gpus", "torch_cuda", "defined", "said"),
    [
        ((H200,), "13.0", True, None),
        ((ADA,), "13.0", True, "Float8BlockScaling needs compute capability 9.0+ and CUDA 12.9+"),
        ((H200,), "12.8", True, "Float8BlockScaling needs compute capability 9.0+ and CUDA 12.9+"),
        ((H200,), "13.0", False, "TransformerEngine 2.9.0 has no Float8BlockScaling recipe"),
    ],
)
def test_block_scaling_runs_where_te_says_it_can(gpus: tuple[GpuInfo, ...], torch_cuda: str, defined: bool, said: str | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """TE's own rule (``check_fp8_block_scaling_support``), and a TE that defines the recipe: else a skip that says
    which; the legacy executor declines every recipe its API does not take."""
    import dataclasses

    monkeypatch.setattr(reasons, "build_version", lambda name: "2.9.0")
    monkeypatch.setattr(reasons, "te_recipe_defined", lambda name: defined)
    env = dataclasses.replace(_env(te="2.9.0", gpus=gpus), torch_cuda=torch_cuda)
    got = reasons.recipe_declined("Float8BlockScaling", "functional", env)
    assert got == said if said is None else said in (got or ""), got
    if said is None:
        assert "takes DelayedScaling and MXFP8BlockScaling only" in reasons.recipe_declined("Float8BlockScaling", "legacy", env)
        assert reasons.recipe_declined("DelayedScaling", "legacy", env) is None


@pytest.mark.parametrize(("thunder", "absent"), [("0.2.0.dev20240901", True), ("0.2.1", False), ("0.2.6", False), (None, False)])
def test_symbolic_values_are_absent_where_thunder_keeps_every_shape_static(thunder: str | None, absent: bool) -> None:
    """Before 0.2.1 ``cache="symbolic values"`` compiles a cache entry per shape: the default cache's row, not its own."""
    said = reasons.feature_absent("legacy", thunder, recipe_changes=False, compile_path="jit", cache="symbolic values")
    assert (said is not None) == absent and (not absent or "makes no shape symbolic" in said), said
    assert reasons.feature_absent("legacy", thunder, recipe_changes=False, compile_path="jit") is None


def test_a_te_recipe_is_read_in_its_source_without_importing_te() -> None:
    """Where TE is not installed no recipe is defined (and nothing is imported to find out)."""
    import sys

    if installed_version("transformer_engine") is None:
        assert not reasons.te_recipe_defined("Float8BlockScaling")
    assert "transformer_engine" not in sys.modules


def test_environment_round_trips_through_json() -> None:
    env = _env(gpus=(H200, A100), te="2.12.0")
    assert Environment.from_json(env.to_json()) == env


def test_a_legacy_module_whose_te_imports_failed_is_labelled_with_the_import_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TE installed but the executor's TE imports failed (TE 2.10+ under thunder 0.2.6): the label names the
    failing import, replayed from the module's own source (its warning is gone once thunder imported it)."""
    import importlib.util

    from teparity.stack import executors

    source = tmp_path / "legacy_like.py"
    source.write_text(
        "import warnings\nTE_AVAILABLE = True\nif TE_AVAILABLE:\n    try:\n        import json\n"
        "        from json import CPUOffloadEnabled\n        import transformer_engine_torch as tex\n"
        "    except Exception as ex:\n        warnings.warn(f'transformer_engine failed to import with exception {ex}')\n"
        "        TE_AVAILABLE = False\n"
        "try:\n    from json import NotATransformerEngineImport\nexcept ImportError:\n    pass\n"
    )
    spec = importlib.util.spec_from_file_location("legacy_like", source)
    module = importlib.util.module_from_spec(spec)
    with pytest.warns(UserWarning):
        spec.loader.exec_module(module)
    monkeypatch.setattr(executors, "installed_version", lambda name: "2.20.2")
    said = executors._te_imports_failed(module)
    assert said == "from json import CPUOffloadEnabled: ImportError: cannot import name 'CPUOffloadEnabled' from 'json' " \
        f"({json.__file__})", said
    module.TE_AVAILABLE = True
    assert executors._te_imports_failed(module) is None
    info = ExecutorInfo("legacy", "m", "a", executor_present=True, te_imports_failed=said)
    assert f"[TE_AVAILABLE is False: {said}]" in info.label()
    module.TE_AVAILABLE = False
    monkeypatch.setattr(executors, "installed_version", lambda name: None)
    assert executors._te_imports_failed(module) is None  # no TE at all: an ordinary skip, elsewhere


#: (thunder build, TE, accepted): each boundary of te_gates.TE_GATES from both sides, as read in the builds'
#: executor sources (docs/facts.md). "1.8.0" is accepted by a "> 1.8" gate and "1.8" is not: LooseVersion.
GATE_BOUNDARIES = [
    ("0.2.0.dev20240602", "1.5.0", True),  # no gate before dev20240609
    ("0.2.0.dev20240609", "1.6.0", True), ("0.2.0.dev20240609", "1.6", False), ("0.2.0.dev20240609", "1.5.0", False),
    ("0.2.0.dev20240728", "1.6.0", True), ("0.2.0.dev20240728", "1.7.0", True), ("0.2.0.dev20240728", "1.8.0", True),
    ("0.2.0.dev20240804", "1.7.0", False), ("0.2.0.dev20240804", "1.6.0", False), ("0.2.0.dev20240804", "1.8.0", True),
    ("0.2.0.dev20240804", "1.8.0+3ec998e", True), ("0.2.0.dev20240804", "1.8", False),
    ("0.2.0.dev20240915", "1.8.0", True), ("0.2.0.dev20240922", "1.8.0", False), ("0.2.0.dev20240922", "1.8.0+3ec998e", False),
    ("0.2.0.dev20240922", "1.9.0", True),
    ("0.2.1", "1.8.0", False), ("0.2.1", "1.9.0", True), ("0.2.1", "1.13.0", True),
    ("0.2.1", "1.9.0.dev0+abc", True),  # LooseVersion: [1, 9, 0, 'dev', ...] > [1, 9]; PEP 440 puts it below 1.9
    ("0.2.2.dev20250209", "1.9.0", True), ("0.2.2.dev20250216", "1.9.0", False), ("0.2.2.dev0", "1.13.0", False),
    ("0.2.2", "2.0", False), ("0.2.2", "2.0.0", True), ("0.2.2", "2.0.0.dev0", True),
    ("0.2.4", "1.8.0", False), ("0.2.6", "1.8.0", False), ("0.2.6", "2.12.0", True),
    ("0.2.7.dev20251123", "1.8.0", False), ("0.2.7.dev20251130", "1.8.0", True),  # no legacy executor, no gate
    ("0.2.7.dev20260201", "2.12.0", True), ("0.2.6", None, True),
]


@pytest.mark.parametrize(("thunder", "te", "accepted"), GATE_BOUNDARIES)
def test_a_thunder_build_paired_with_a_te_its_executor_refuses_is_named(thunder: str, te: str | None, accepted: bool) -> None:
    """Read in each build's TE executor (LooseVersion gates): such a pair can only fall back or fail."""
    said = reasons.unsupported_pair(_env(te=te, thunder=thunder))
    assert (said is None) == accepted, said
    if not accepted:
        assert said.startswith(f"lightning-thunder {thunder} does not support TransformerEngine {te}: it accepts TE where "
                               "LooseVersion(TE) > LooseVersion("), said


def test_the_gates_windows_do_not_overlap_except_the_out_of_order_dev0() -> None:
    """Each thunder build is in one window: a second window that also held it would be dead (first match wins)."""
    from teparity.stack.te_gates import TE_GATES

    for build in {thunder for thunder, _, _ in GATE_BOUNDARIES} | {"0.2.2.dev0"}:
        holding = [gate.builds for gate in TE_GATES if gate.covers(Version(build))]
        assert len(holding) <= (2 if build == "0.2.2.dev0" else 1), (build, holding)


LEGACY_GATE = re.compile(
    r"^\s*(TE_VERSION_\w+) = LooseVersion\(version\(\"transformer_engine\"\)\) > LooseVersion\(\"([\d.]+)\"\)", re.M
)


def test_the_installed_thunder_gates_te_where_te_gates_says() -> None:
    """The installed build's own legacy executor source, read without importing it: the flag that its
    module-level ``if not TE_VERSION_...:`` (in ``if TE_AVAILABLE:``) refuses on, and that flag's floor, are
    te_gates' gate for this build. The deeper-indented checks are feature switches inside functions."""
    from teparity.stack.te_gates import gate_for

    spec = importlib.util.find_spec("thunder")
    executors = Path(spec.origin).parent / "executors"
    sources = [executors / name for name in ("transformer_engine_v1ex.py", "transformer_engineex.py") if (executors / name).exists()]
    floors = {}
    for source in sources[:1]:
        text = source.read_text()
        flags = dict(LEGACY_GATE.findall(text))
        floors = {flag: flags[flag] for flag in re.findall(r"^    if not (TE_VERSION_\w+):", text, re.M) if flag in flags}
    gate = gate_for(THUNDER)
    assert floors == ({} if gate is None else {f"TE_VERSION_{gate.above.replace('.', '_')}_PLUS": gate.above}), (THUNDER, sources)


def test_one_probe_serves_the_controller_and_every_xdist_worker(pytester: pytest.Pytester, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The header (controller, before collection) and each worker's first test (after collection has put
    test directories on sys.path) read one cached probe: the probe is seconds of imports on a GPU host."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the probe cache lives: only this run's
    pytester.makepyfile(**{"sub/test_probe": """
        from teparity.stack.envprobe import environment

        def test_a(): assert environment().versions.torch
        def test_b(): assert environment().versions.torch
    """})
    result = pytester.runpytest_subprocess("-n", "2", "-p", "teparity.plugin", "-p", "no:cacheprovider", "sub")
    result.assert_outcomes(passed=2)
    assert len(list(tmp_path.glob("teparity-env-*.json"))) == 1, sorted(p.name for p in tmp_path.iterdir())


_GATED_SYNC = '''
TE_VERSION_1_6_PLUS = False

def _insert_bwd_fp8_meta_sync(bw_extrace):
    pass

def _rearrange_transformer_engine_linear(fw_extrace, bw_extrace):
    pass

def _transformer_engine_bwd_fp8_meta_sync(fw_extrace, bw_extrace):
    if TE_VERSION_1_6_PLUS:
        _insert_bwd_fp8_meta_sync(bw_extrace)
    else:
        _rearrange_transformer_engine_linear(fw_extrace, bw_extrace)
'''


def test_a_backward_sync_inserted_only_behind_a_te_version_flag_that_is_off_skips_the_trace_tier(tmp_path: Path) -> None:
    """thunder 0.2.0.dev20240513 .. dev20240602 insert the sync only ``if TE_VERSION_1_6_PLUS``: without TE
    (the CPU runner) they reorder the linears instead, so the trace tier has no sync to place and skips,
    saying so; with the flag on (TE > 1.6) it runs."""
    import importlib.util

    from teparity.stack import executors

    source = tmp_path / "gated_sync.py"
    source.write_text(_GATED_SYNC)
    spec = importlib.util.spec_from_file_location("gated_sync", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert executors._backward_sync_gate_off(module) == "TE_VERSION_1_6_PLUS"
    module.TE_VERSION_1_6_PLUS = True
    assert executors._backward_sync_gate_off(module) is None
    del module._transformer_engine_bwd_fp8_meta_sync  # 0.2.0.dev20240609 on: inserted unconditionally, elsewhere
    assert executors._backward_sync_gate_off(module) is None
    legacy = ExecutorInfo("legacy", "m", "a", has_backward_sync=True, executor_present=True, backward_sync_gate_off="TE_VERSION_1_6_PLUS")
    reason = reasons.no_backward_sync(_env(thunder="0.2.0.dev20240513", executors={"legacy": legacy, "functional": ExecutorInfo("functional")}))
    assert reason == ("lightning-thunder 0.2.0.dev20240513's legacy TE executor inserts te_sync_fp8_meta_bwd only if "
                      "TE_VERSION_1_6_PLUS, which is false here (TransformerEngine absent); without it, it reorders the TE "
                      "linears instead")
    assert reasons.no_backward_sync(_env()) is None


@pytest.mark.parametrize(
    ("thunder", "rejects"),
    [
        ("0.2.0.dev20240404", True), ("0.2.0.dev20240728", True), ("0.2.0.dev20241201", True), ("0.2.1", True),
        ("0.2.3", True), ("0.2.4.dev20250601", True),  # the last build that raises
        ("0.2.4.dev20250608", False),  # the first that runs (docs/results/cpu-ddp-transform-2024/bisect.jsonl)
        ("0.2.4", False), ("0.2.6", False), ("0.2.7.dev20260201", False), (None, False),
    ],
)
def test_a_ddp_transform_that_rejects_an_input_requiring_grad_is_named(thunder: str | None, rejects: bool) -> None:
    """The bisected boundary: before it the ddp tier's inputs do not require grad, and the reason says so."""
    from teparity.stack.reasons import no_input_grad_under_ddp

    said = no_input_grad_under_ddp(thunder)
    assert (said is not None) == rejects, said
    if rejects:
        assert f"lightning-thunder {thunder}'s DDP transform raises on an input that requires grad" in said
        assert "input gradients are not compared" in said


@pytest.mark.parametrize(
    ("te", "nvml", "stages"),
    [
        (None, "1", (("torch", "thunder"),)),
        ("2.9.0", "1", (("torch", "transformer_engine.pytorch"), COMPILER_MODULES)),
        ("2.9.0", None, (("torch", "transformer_engine.pytorch"), COMPILER_MODULES)),
    ],
)
def test_thunder_is_preloaded_before_the_fork_only_without_te_whatever_the_nvml_check(
    te: str | None, nvml: str | None, stages: tuple[tuple[str, ...], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TE installed, a child forked after thunder's import cannot use CUDA, the NVML check or not (seen
    on the H200): the fork server imports torch, TE and torch's compiler (which the probe keeps only where
    its child still runs CUDA), never thunder."""
    assert not any(m.startswith("thunder") for m in COMPILER_MODULES)
    from teparity.stack import envprobe

    real = envprobe.installed_version
    monkeypatch.setattr(envprobe, "installed_version", lambda name: te if name == "transformer_engine" else real(name))
    if nvml is None:
        monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", nvml)
    assert fork_stages() == stages


#: The two stages where TE is installed: torch and TE, then torch's compiler.
BASE = ("torch", "transformer_engine.pytorch")
FULL = BASE + COMPILER_MODULES


@pytest.mark.parametrize(
    ("checks", "has_gpu", "modules", "error", "note"),
    [
        ([ForkCheck(BASE, False, None), ForkCheck(FULL, False, None)], True, FULL, None, None),
        ([ForkCheck(BASE, False, None), ForkCheck(FULL, True, None)], True, BASE, None, "unfit for CUDA"),
        ([ForkCheck(BASE, False, None), ForkCheck(FULL, False, "RuntimeError: CUDA driver")], True, BASE, None, "failed a tensor op"),
        ([ForkCheck(BASE, True, None)], True, (), "unfit for CUDA", None),
        ([ForkCheck(BASE, True, None)], False, BASE, None, None),
    ],
    ids=["all-stages", "compiler-unfit", "compiler-op-fails", "none", "unfit-without-a-gpu"],
)
def test_the_fork_server_preloads_the_stages_whose_child_ran_and_the_probe_says_why_not_more(
    checks: list[ForkCheck], has_gpu: bool, modules: tuple[str, ...], error: str | None, note: str | None
) -> None:
    verdict = fork_verdict(checks, has_gpu)
    assert tuple(verdict["fork_modules"]) == modules
    assert verdict["fork_error"] is None if error is None else error in verdict["fork_error"]
    assert (verdict["fork_note"] is None) == (note is None)
    if note is not None:
        assert note in verdict["fork_note"] and "torch._dynamo" in verdict["fork_note"] and "only" in verdict["fork_note"]


@pytest.mark.parametrize("variable", ["CUDA_VISIBLE_DEVICES", "PYTORCH_NVML_BASED_CUDA_CHECK"])
def test_the_probe_cache_is_one_per_setting_that_decides_what_forks(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``PYTORCH_NVML_BASED_CUDA_CHECK=0`` the compiler stage cannot be forked after, under ``=1`` it can
    (seen on the H200), and visible GPUs decide what the probe reads: a probe cached under one setting must
    not answer for another."""
    from teparity.stack import envprobe

    paths = set()
    for value in ("0", "1"):
        monkeypatch.setenv(variable, value)
        paths.add(envprobe._cache_path())
    monkeypatch.delenv(variable)
    paths.add(envprobe._cache_path())
    assert len(paths) == 3, paths


def _install_fake_te(folder: Path) -> None:
    """A TransformerEngine distribution whose ``transformer_engine.pytorch`` imports a module nobody installed:
    what a user sees when a dependency of TE (pydantic, say) is missing from the folder TE was installed into."""
    (folder / "transformer_engine-2.99.0.dist-info").mkdir(parents=True)
    (folder / "transformer_engine-2.99.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: transformer_engine\nVersion: 2.99.0\n")
    (folder / "transformer_engine").mkdir()
    (folder / "transformer_engine" / "__init__.py").write_text("")
    (folder / "transformer_engine" / "pytorch.py").write_text("import teparity_missing_dependency\n")


def test_a_run_after_the_missing_module_is_installed_sees_it(pytester: pytest.Pytester, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that found the system under test failing to import serves only its own run: the user installs
    what was missing into the same folder (versions and locations unchanged) and the next run must see it."""
    site = tmp_path / "site"
    _install_fake_te(site)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the probe cache lives: only this test's
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(test_gate="""
        import pytest

        @pytest.mark.check("probe")
        def test_a_gate_test(): pass
    """)
    first = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "-p", "no:xdist")
    first.assert_outcomes(errors=1)
    said = pytest.LineMatcher(unwrapped(first.stdout.str()).splitlines())
    said.fnmatch_lines(["*THE SYSTEM UNDER TEST DOES NOT IMPORT*No module named 'teparity_missing_dependency'*"])
    (site / "teparity_missing_dependency.py").write_text("")  # the user installs it
    second = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", "-p", "no:xdist")
    assert "teparity_missing_dependency" not in second.stdout.str(), second.stdout.str()[-3000:]
    assert len(list(tmp_path.glob("teparity-env-*.json"))) == 1  # one environment, probed again
