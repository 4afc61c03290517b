"""Read the environment (GPUs, TE import, thunder's TE executors) in a one-off subprocess, cached as JSON.

The pytest processes never import thunder or initialize CUDA just to decide what to skip: the probe
does it once per environment, under a file lock, so that the xdist controller and every worker read
the same answer (docs/conventions.md, "Collection under xdist"). A probe that found thunder or TE failing
to import serves only the run that made it (``RUN_VARIABLE``): what it failed on (a missing module, a
broken install) can be mended in place, in a folder whose packages keep their versions and locations.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from teparity.stack.environment import Environment
from teparity.stack.executors import find_te_executors
from teparity.stack.versions import Versions, installed_version

PROBE_TIMEOUT_S = 300


#: What a fork server imports after torch and TE where a forked child still runs CUDA after them: torch's
#: compiler. TE compiles its Python FP8 scale update with ``torch.compile`` (``jit_fuser``), so every rank's
#: first FP8 step would import inductor itself; thunder is not among them (see ``fork_stages``).
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.runtime.triton_heuristics")


def fork_stages() -> tuple[tuple[str, ...], ...]:
    """What a fork server may import before it forks ranks, in stages: each stage adds to the ones before,
    and the environment probe keeps the most stages after which a forked child still runs CUDA
    (``envprobe.fork_check``). torch and ``transformer_engine.pytorch`` leave fork usable. torch's compiler
    (``COMPILER_MODULES``) does only under the NVML-based CUDA check: its import calls
    ``torch.cuda.is_available()``, which otherwise asks the CUDA runtime ("Cannot re-initialize
    CUDA in forked subprocess"), so teparity sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` for its ranks
    (``teparity.launch.rank_env``). thunder's import does not leave fork usable where TE is installed, even
    with that check (seen on the H200: 0.2.6 initialises torch's CUDA, 0.2.7.dev20260201 the driver;
    docs/facts.md), so each rank imports thunder itself. Without TE nothing in a rank uses a
    GPU: torch and thunder."""
    if installed_version("transformer_engine") is None:
        return (("torch", "thunder"),)
    return (("torch", "transformer_engine.pytorch"), COMPILER_MODULES)

#: The run a cached probe belongs to: the process that starts a run (a lone pytest, the xdist controller,
#: ``doctor``) sets a new value, which its workers, ranks and fork server inherit (``new_run``).
RUN_VARIABLE = "TEPARITY_PROBE_RUN"


def new_run() -> None:
    """Start a run of probe readers: a failed probe cached before it is probed again."""
    import uuid

    os.environ[RUN_VARIABLE] = uuid.uuid4().hex


def _reusable(cached: dict[str, object]) -> bool:
    """A cached probe answers for this process unless it found an import failure in another run."""
    data = cached["environment"]
    failed = data["te_import_error"] or data["thunder_import_error"]  # type: ignore[index]
    return not failed or (cached["run"] is not None and cached["run"] == os.environ.get(RUN_VARIABLE))


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text.splitlines()[0][:300]


def import_forkable(modules: tuple[str, ...]) -> list[str]:
    """Import ``modules``, as a fork server does before it forks ranks, then fill triton's cache key where
    inductor is among them (a hash of triton's files that inductor computes once per process, on its first
    compile; pure file reading); each step's time, as the ranks log theirs (``"import torch 2.91 s"``). An
    import that fails is left to the next importer (the probe's import checks, every rank), which raises it
    with its whole traceback."""
    import importlib
    import time

    timings = []
    for name in modules:
        clock = time.monotonic()
        try:
            importlib.import_module(name)
        except Exception:
            pass
        timings.append(f"import {name} {time.monotonic() - clock:.2f} s")
    if "torch._inductor.compile_fx" in modules and "torch._inductor.compile_fx" in sys.modules:
        clock = time.monotonic()
        try:
            from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

            if HAS_TRITON:
                triton_key()
                timings.append(f"triton key {time.monotonic() - clock:.2f} s")
        except Exception:  # another torch's layout: each rank computes it itself
            pass
    return timings


@dataclasses.dataclass(frozen=True)
class ForkCheck:
    """A child forked after ``modules`` (every stage so far) were imported, and what it saw: whether torch
    marked it unfit for CUDA (it does once its parent asked the GPU anything) and its tensor op's error."""

    modules: tuple[str, ...]
    bad_fork: bool
    error: str | None

    def failure(self, has_gpu: bool) -> str | None:
        """Why ranks cannot be forked after these imports, or None. A child that torch marked unfit for
        CUDA is fine where there is no GPU (nothing in it will use CUDA)."""
        imported = ", ".join(self.modules)
        if self.error is not None:
            return f"a child forked after importing {imported} failed a tensor op: {self.error}"
        if self.bad_fork and has_gpu:
            return f"torch marks a child forked after importing {imported} unfit for CUDA"
        return None


def fork_check() -> list[ForkCheck]:
    """Import each of ``fork_stages()`` in turn, as the fork server would, and after each fork a child that
    runs a tensor op on the GPU where it sees one; stops after the first stage whose child was unfit or
    failed (no later stage can undo it). Must run before anything in this process touches CUDA."""
    checks: list[ForkCheck] = []
    modules: tuple[str, ...] = ()
    for stage in fork_stages():
        import_forkable(stage)
        modules += stage
        checks.append(ForkCheck(modules, *_forked_tensor_op()))
        if checks[-1].bad_fork or checks[-1].error is not None:
            break
    return checks


def _forked_tensor_op() -> tuple[bool, str | None]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanup
        os.close(read)
        report: dict[str, object] = {"bad_fork": None, "error": None}
        try:
            import torch

            report["bad_fork"] = bool(torch.cuda._is_in_bad_fork())
            device = "cuda" if torch.cuda.is_available() else "cpu"
            (torch.ones(2, device=device) * 2).sum().item()
        except BaseException as error:
            report["error"] = _first_line(error)
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if not text:
        return False, f"the forked child ended with status {status} and no report"
    report = json.loads(text)
    return bool(report["bad_fork"]), report["error"]


def fork_verdict(checks: list[ForkCheck], has_gpu: bool) -> dict[str, object]:
    """The probe's fork fields: the modules of the last stage whose child ran (the fork server imports
    them), why ranks cannot be forked at all (the first stage failed), and why a later stage is left out."""
    passed = [check for check in checks if check.failure(has_gpu) is None]
    failed = next((why for check in checks if (why := check.failure(has_gpu))), None)
    if not passed:
        return {"fork_modules": [], "fork_error": failed, "fork_note": None}
    note = failed and f"{failed}; preloading {', '.join(passed[-1].modules)} only (each rank imports the rest)"
    return {"fork_modules": list(passed[-1].modules), "fork_error": None, "fork_note": note}


def probe() -> Environment:
    """Do the reading in this process (meant for the subprocess; it imports torch, TE and thunder)."""
    checks = fork_check()  # first: the GPU queries below would make any child unfit
    try:
        import torch
    except ImportError:  # a Python without torch: no thunder either, and the gate says so (reasons.thunder_absent)
        torch = None

    gpus = []
    if torch is not None and torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            gpus.append(
                {"name": torch.cuda.get_device_name(index), "capability": list(torch.cuda.get_device_capability(index))}
            )
    versions = Versions.installed()
    te_error = None
    if versions.transformer_engine is not None:
        try:
            import transformer_engine.pytorch  # noqa: F401
        except Exception as error:  # any import failure is a reason to report, not to crash on
            te_error = _first_line(error)
    thunder_error = None
    executors = {}
    try:
        import thunder  # noqa: F401

        executors = {k: v.as_dict() for k, v in find_te_executors().items()}
    except Exception as error:
        thunder_error = _first_line(error)
        why = "lightning-thunder is not installed" if versions.thunder is None else f"thunder fails to import: {thunder_error}"
        executors = {kind: {"kind": kind, "missing_reason": why} for kind in ("legacy", "functional")}
    return Environment.from_json(
        {
            "versions": versions.to_json(),
            "gpus": gpus,
            "executors": executors,
            "te_import_error": te_error,
            "thunder_import_error": thunder_error,
            "torch_cuda": torch.version.cuda if torch is not None else None,
            **fork_verdict(checks, bool(gpus)),
        }
    )


def _found_at() -> list[str | None]:
    """Where ``import torch``, ``thunder`` and ``transformer_engine`` would load from (found, not
    imported): what the import path decides for the probe. Not the import path itself: pytest adds test
    directories to it during collection, and a key that changed then would have the xdist workers probe
    again after the controller did."""
    found = []
    for name in ("torch", "thunder", "transformer_engine"):
        spec = importlib.util.find_spec(name)
        found.append(spec.origin if spec is not None else None)
    return found


def _cache_path() -> Path:
    """One cache file per interpreter, location and version of each system under test, visible GPUs, CUDA
    check and probe code."""
    probe_code = [Path(__file__).read_bytes(), Path(sys.modules[Versions.__module__].__file__).read_bytes()]
    key = json.dumps(
        [
            sys.executable,
            _found_at(),
            os.environ.get("CUDA_VISIBLE_DEVICES"),
            os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),  # whether inductor's import leaves fork usable
            Versions.installed().to_json(),  # a source tree's new commit places it anew
            hashlib.sha256(b"".join(probe_code)).hexdigest(),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"teparity-env-{digest}.json"


@functools.cache
def environment() -> Environment:
    """The probed environment, from the cache when another process of this environment already probed (one
    that found an import failure: of this run, ``_reusable``)."""
    path = _cache_path()
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists() and _reusable(cached := json.loads(path.read_text())):
            return Environment.from_json(cached["environment"])
        completed = subprocess.run(
            [sys.executable, "-m", "teparity.stack.envprobe"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        if completed.returncode != 0:
            raise RuntimeError(
                f"the environment probe failed (exit {completed.returncode}):\n{completed.stderr[-4000:]}"
            )
        data = json.loads(completed.stdout.strip().splitlines()[-1])
        path.write_text(json.dumps({"environment": data, "run": os.environ.get(RUN_VARIABLE)}))
        return Environment.from_json(data)


if __name__ == "__main__":
    print(json.dumps(probe().to_json()))
