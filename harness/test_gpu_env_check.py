"""tox's GPU envs stop with what is missing (scripts/gpu_env_check.py) rather than letting the gate skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import REPO

SCRIPT = REPO / "scripts" / "gpu_env_check.py"


def _check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("version", ["2.9.0", "1.6"])
def test_an_env_without_te_fails_and_names_what_is_missing(version: str) -> None:
    pytest.importorskip("torch")
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("TransformerEngine is installed here")
    done = _check("installed", "--te", version)
    assert done.returncode == 1
    assert "gpu env: transformer_engine is not installed" in done.stderr, done.stderr


def test_a_toolchain_without_the_wanted_cuda_major_fails(tmp_path: Path) -> None:
    import os

    import torch

    wrong_major = 11 if str(torch.version.cuda).startswith(("12.", "13.")) else 13
    done = _check("toolchain", "--cuda", str(wrong_major), env={**os.environ, "CUDA_HOME": str(tmp_path)})
    assert done.returncode == 1
    assert f"CUDA {wrong_major} toolkit missing: no nvcc under CUDA_HOME={tmp_path}" in done.stderr, done.stderr
    assert f"not {wrong_major}" in done.stderr, done.stderr
