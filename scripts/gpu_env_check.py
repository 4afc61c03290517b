"""Preconditions and postconditions of tox's GPU envs (tox.ini), so that a missing toolkit or a TE that
did not install stops the env with what is wrong instead of letting the gate skip everything.

usage: python scripts/gpu_env_check.py toolchain --cuda 13      (before building TE's torch extension)
       python scripts/gpu_env_check.py installed --te 2.9.0       (TE, its core and its extension at that version)
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import subprocess
import sys


def _nvcc_release(cuda_home: str) -> str | None:
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    if not os.path.isfile(nvcc):
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return out.rpartition("release ")[2].partition(",")[0] or None


def toolchain_problems(cuda_major: int) -> list[str]:
    import torch

    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cudnn = os.environ.get("CUDNN_PATH", "")
    include_dirs = [*os.environ.get("CPLUS_INCLUDE_PATH", "").split(os.pathsep), os.path.join(home, "include"), "/usr/include"]
    release = _nvcc_release(home)
    problems = []
    if release is None:
        problems.append(f"CUDA {cuda_major} toolkit missing: no nvcc under CUDA_HOME={home} (TE's torch extension is compiled here)")
    elif not release.startswith(f"{cuda_major}."):
        problems.append(f"nvcc under {home} is CUDA {release}; this env needs CUDA {cuda_major} (torch is built for {torch.version.cuda})")
    if not str(torch.version.cuda).startswith(f"{cuda_major}."):
        problems.append(f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, not {cuda_major}")
    if not any(os.path.isfile(os.path.join(d, "cudnn.h")) for d in include_dirs + [os.path.join(cudnn, "include")]):
        problems.append(f"cuDNN headers missing: no cudnn.h in {include_dirs} or CUDNN_PATH={cudnn}")
    if not any(os.path.isfile(os.path.join(d, "nccl.h")) for d in include_dirs):
        problems.append(f"NCCL headers missing: no nccl.h in {include_dirs} (TE 2.17+ extension includes it)")
    if not torch.cuda.is_available():
        problems.append("no CUDA GPU visible to torch (driver, CUDA_VISIBLE_DEVICES)")
    elif max(torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())) < (8, 9):
        problems.append("no FP8-capable GPU (sm_89+) visible: the GPU tiers would only skip")
    return problems


def installed_problems(te_version: str) -> list[str]:
    """TE's packages at ``te_version`` (a prefix: 1.6 matches a local build 1.6.0+c81733f), and TE and
    thunder importable after torch."""
    problems = []
    for dist in ("transformer_engine", "transformer_engine_cu13", "transformer_engine_torch"):
        try:
            got = md.version(dist)
        except md.PackageNotFoundError:
            if dist == "transformer_engine" or not te_version.startswith("1."):
                problems.append(f"{dist} is not installed")
            continue
        if got != te_version and not got.startswith(te_version + "."):
            problems.append(f"{dist}=={got} installed, wanted {te_version}")
    if not problems:
        try:
            import thunder  # noqa: F401
            import torch  # noqa: F401  (TE 1.x finds cuDNN through torch's libraries)
            import transformer_engine.pytorch  # noqa: F401
        except Exception as error:  # noqa: BLE001 (any import failure is the finding)
            problems.append(f"import failed: {type(error).__name__}: {error}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    toolchain = commands.add_parser("toolchain")
    toolchain.add_argument("--cuda", type=int, required=True, help="CUDA major version of torch and the toolkit")
    installed = commands.add_parser("installed")
    installed.add_argument("--te", required=True, help="the TransformerEngine version that must be installed")
    args = parser.parse_args(argv)
    problems = toolchain_problems(args.cuda) if args.command == "toolchain" else installed_problems(args.te)
    for problem in problems:
        print(f"gpu env: {problem}", file=sys.stderr)
    if not problems:
        print(f"gpu env: {args.command} ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
