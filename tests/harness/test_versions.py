"""versions: thunder's TE executors are found where docs/facts.md says, and every "cannot" says why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from teparity.stack.envprobe import environment
from teparity.stack.versions import (
    Environment,
    ExecutorInfo,
    GpuInfo,
    Versions,
    find_te_executors,
    installed_version,
)

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
    got = env.fp8_reason()
    assert got == reason if reason is None else reason in (got or ""), got


def test_executor_and_gpu_count_reasons() -> None:
    env = _env(gpus=(H200,))
    assert env.executor_reason("legacy") is None
    assert env.executor_reason("functional") == "lightning-thunder 0.2.2 has none: because"
    assert env.gpus_reason(1) is None
    assert env.gpus_reason(2) == "needs 2 GPUs, 1 visible"
    no_sync = _env(executors={"legacy": ExecutorInfo("legacy", "m", "a"), "functional": ExecutorInfo("functional", "m", "a")})
    assert "has no te_sync_fp8_meta_bwd (added 2024-05-13, thunder PR #379)" in no_sync.backward_sync_reason()


def test_environment_round_trips_through_json() -> None:
    env = _env(gpus=(H200, A100), te="2.12.0")
    assert Environment.from_json(env.to_json()) == env


def test_a_legacy_module_whose_te_imports_failed_is_labelled_with_the_import_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TE installed but the executor's TE imports failed (TE 2.10+ under thunder 0.2.6): the label names the
    failing import, replayed from the module's own source (its warning is gone once thunder imported it)."""
    import importlib.util

    from teparity.stack import versions

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
    monkeypatch.setattr(versions, "installed_version", lambda name: "2.20.2")
    said = versions._te_imports_failed(module)
    assert said == "from json import CPUOffloadEnabled: ImportError: cannot import name 'CPUOffloadEnabled' from 'json' " \
        f"({json.__file__})", said
    module.TE_AVAILABLE = True
    assert versions._te_imports_failed(module) is None
    info = ExecutorInfo("legacy", "m", "a", executor_present=True, te_imports_failed=said)
    assert f"[TE_AVAILABLE is False: {said}]" in info.label()
    module.TE_AVAILABLE = False
    monkeypatch.setattr(versions, "installed_version", lambda name: None)
    assert versions._te_imports_failed(module) is None  # no TE at all: an ordinary skip, elsewhere


@pytest.mark.parametrize(
    ("thunder", "te", "unsupported"),
    [
        ("0.2.6", "1.8.0", True), ("0.2.4", "1.8.0", True), ("0.2.1", "1.8.0", True),
        ("0.2.1", "1.9.0", False), ("0.2.6", "2.0.0", False), ("0.2.6", "2.12.0", False),
        ("0.2.0.dev20240728", "1.8.0", False), ("0.2.7.dev20260201", "2.12.0", False), ("0.2.6", None, False),
    ],
)
def test_a_thunder_release_paired_with_a_te_it_does_not_accept_is_named(thunder: str, te: str | None, unsupported: bool) -> None:
    """Read in each release's TE executor (LooseVersion gates): such a pair can only fall back or fail."""
    said = _env(te=te, thunder=thunder).unsupported_pair()
    assert (said is not None) == unsupported, said
    if unsupported:
        assert said.startswith(f"lightning-thunder {thunder} does not support TransformerEngine {te}: it accepts TE ")


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
    from teparity.stack.versions import ddp_input_grad_reason

    said = ddp_input_grad_reason(thunder)
    assert (said is not None) == rejects, said
    if rejects:
        assert f"lightning-thunder {thunder}'s DDP transform raises on an input that requires grad" in said
        assert "input gradients are not compared" in said
