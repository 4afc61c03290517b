"""Reference sides computed once and reused: eager TE (or torch's DDP, FSDP2, eager torch) is the same bytes for one
stack, teparity source and spec (docs/design.md, "Determinism"), whatever thunder build the other side runs. A call the
tier marks with ``reference(fn, ...)`` is served from the store under its key, or computed and stored there, by the
session's ``StrategyRanks.side_by_side``.

The key is everything a reference depends on (``key``): the function and its arguments (the spec, its model, the scale
update), the world size and backend, the stack (``stack_identity``: Python, torch and its CUDA libraries, TE's version
and installed files, the GPUs), teparity's own source, the environment variables that change what ranks compute, and
what rank code reads about the installed thunder (``teparity.stack.since.RANK_READS``, the only thunder facts a
reference side may read). A key that differs in anything, a record that does not read back, or
``--teparity-fresh-reference`` computes again; records are written whole (a rename), and the computation of one key is
claimed by a lock file, so that stacks and workers run side by side compute it once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

#: Variables that change what a rank computes (TE's switches, NCCL's algorithms, cuBLAS's workspace, thread counts,
#: the injected mutations, FSDP on gloo); every one whose name starts with one of these is in the key.
ENV_PREFIXES = ("NVTE_", "NCCL_ALGO", "NCCL_PROTO", "CUBLAS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "TORCHINDUCTOR_COMPILE_THREADS", "PYTORCH_NVML_BASED_CUDA_CHECK", "TEPARITY_INJECT",
                "TEPARITY_FSDP_ON_GLOO")
#: How long a worker waits for another process's computation of a key before computing it itself.
CLAIM_WAIT_S = 900.0
#: The record format: a record of another format is computed again.
FORMAT = 1
#: A record (and a lock) unused this long leaves the store when a run opens it: each teparity commit keys its own.
KEPT_UNUSED_S = 14 * 24 * 3600.0


class ReferenceCall(NamedTuple):
    """A call for ranks (``(fn, args)``, as ``teparity.gate.ranks.Call``) whose result is a reference: reusable under its
    key. ``keyed_by``: the arguments that determine the result where the call's own carry more (None: ``args``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    keyed_by: tuple[Any, ...] | None = None


def reference(fn: Callable[..., Any], *args: Any, keyed_by: tuple[Any, ...] | None = None) -> ReferenceCall:
    return ReferenceCall(fn, args, keyed_by)


@functools.cache
def teparity_source() -> str:
    """A digest of teparity's own source: the rank code that computes a reference and the judge that reads it."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def installed_files(top_level: str) -> str | None:
    """A digest of an installed package's files (each file's path, size and modification time), found without importing
    it: a TE built from source again, in place, under the same version, is another key. None where not installed."""
    spec = importlib.util.find_spec(top_level)
    if spec is None or spec.origin is None and not spec.submodule_search_locations:
        return None
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] or [Path(spec.origin)]
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                digest.update(f"{path.relative_to(root.parent)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@functools.cache
def stack_identity() -> dict[str, Any]:
    """What a reference depends on in the stack, thunder aside: Python, torch (its version, commit, CUDA and cuDNN), the
    NVIDIA libraries installed as distributions, TE's version and files (its torch extension included), the GPUs."""
    import torch

    from teparity.stack.envprobe import environment

    env = environment()
    nvidia = sorted(f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
                    if (dist.metadata["Name"] or "").lower().startswith("nvidia-"))
    return {
        "python": platform.python_version(), "torch": env.versions.torch, "torch_commit": torch.version.git_version,
        "cuda": env.torch_cuda, "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "nvidia": nvidia, "te": env.versions.transformer_engine, "te_files": installed_files("transformer_engine"),
        "te_torch_files": installed_files("transformer_engine_torch"), "gpus": [gpu.name for gpu in env.gpus],
    }


def environment_in_key() -> dict[str, str]:
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith(ENV_PREFIXES)}


def thunder_reads(thunder: str | None) -> dict[str, bool]:
    """What rank code reads about the installed thunder build (``teparity.stack.since.RANK_READS``), by fact."""
    from teparity.stack import since

    return {str(fact): since.reached(thunder, fact) for fact in since.RANK_READS}


def key(call: ReferenceCall, world_size: int, backend: str, thunder: str | None) -> dict[str, Any] | None:
    """The key of ``call``'s reference on this stack, as JSON reads it back (the form a record holds), or None where none
    can be formed (an argument without a stable text: an object named by its address, which would never match, or
    anything whose repr raises)."""
    from teparity.launch.outcome import qualified_name

    try:
        arguments = repr(call.args if call.keyed_by is None else call.keyed_by)
    except Exception:
        return None
    if " at 0x" in arguments:
        return None
    return json.loads(json.dumps(
        {"format": FORMAT, "call": qualified_name(call.fn), "arguments": arguments, "world_size": world_size,
         "backend": backend, "stack": stack_identity(), "teparity": teparity_source(),
         "environment": environment_in_key(), "thunder_reads": thunder_reads(thunder)}, default=str))


def digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclasses.dataclass
class Served:
    """How one reference of a test was had: computed here, or reused from the run that computed it."""

    call: str
    source: str  # "computed" or "reused"
    run: str

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ReferenceStore:
    """Records of reference sides in ``folder``, one file per key (``digest``). ``fresh``: compute every reference
    (and store it); ``run``: this run's name in the records it writes."""

    folder: Path
    fresh: bool
    run: str
    thunder: str | None
    #: What this process served since ``take_served`` last ran (a test's references, for its report).
    served: list[Served] = dataclasses.field(default_factory=list)

    def serve(self, calls: Sequence[Any], world_size: int, backend: str,
              compute: Callable[[list[Any]], list[Any]]) -> list[Any]:
        """Each call's result: a reference from its record where one reads back under its key, the rest computed by
        ``compute`` (side by side, as asked), each computed reference stored under its key."""
        keys = [key(call, world_size, backend, self.thunder) if isinstance(call, ReferenceCall) else None for call in calls]
        results: dict[int, Any] = {}
        with self._claimed(sorted({digest(k) for k in keys if k is not None})):
            for index, (call, k) in enumerate(zip(calls, keys)):
                if k is not None and not self.fresh and (record := self._read(k)) is not None:
                    results[index] = record["value"]
                    self.served.append(Served(_name(call), "reused", record["run"]))
            missing = [index for index in range(len(calls)) if index not in results]
            computed = compute([_plain(calls[index]) for index in missing]) if missing else []
            for index, value in zip(missing, computed):
                results[index] = value
                if keys[index] is not None and not _raised(value):
                    self._write(keys[index], value)
                if isinstance(calls[index], ReferenceCall):
                    self.served.append(Served(_name(calls[index]), "computed", self.run))
        return [results[index] for index in range(len(calls))]

    def prune(self) -> None:
        """Remove what no run used for ``KEPT_UNUSED_S`` (a record read or written is used: its time is touched)."""
        cutoff = time.time() - KEPT_UNUSED_S
        for path in [*self.folder.glob("*.pickle"), *self.folder.glob("*.lock")]:
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()

    def take_served(self) -> list[dict[str, str]]:
        taken, self.served = [s.as_dict() for s in self.served], []
        return taken

    def _path(self, k: dict[str, Any]) -> Path:
        return self.folder / f"{digest(k)}.pickle"

    def _read(self, k: dict[str, Any]) -> dict[str, Any] | None:
        """The record under ``k``, or None where there is none, it does not read back, or it holds another key."""
        try:
            with open(self._path(k), "rb") as handle:
                record = pickle.load(handle)
        except Exception:  # absent, truncated, written by another teparity: compute it again
            return None
        if not isinstance(record, dict) or record.get("key") != k:
            return None
        with contextlib.suppress(OSError):
            os.utime(self._path(k))  # used: kept by ``prune``
        return record

    def _write(self, k: dict[str, Any], value: Any) -> None:
        """Write the record whole (a temporary file renamed), so that no reader sees part of one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {"key": k, "run": self.run, "value": value}
        temporary = self._path(k).with_suffix(f".{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as handle:
                pickle.dump(record, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self._path(k))
        except Exception as error:  # a store that cannot be written costs reuse, never a verdict
            temporary.unlink(missing_ok=True)
            print(f"teparity: reference not stored ({error})", file=sys.stderr)

    @contextlib.contextmanager
    def _claimed(self, digests: list[str]) -> Iterator[None]:
        """Hold the lock of each key (in order, so that two processes never wait on each other), waiting at most
        ``CLAIM_WAIT_S`` for each; a lock not had in time is computed without it."""
        with contextlib.ExitStack() as held:
            if digests:
                self.folder.mkdir(parents=True, exist_ok=True)
            for name in digests:
                handle = held.enter_context(open(self.folder / f"{name}.lock", "a"))
                deadline = time.monotonic() + CLAIM_WAIT_S
                while True:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
            yield


def run_name(thunder: str | None) -> str:
    """How a record names the run that computed it (``teparity.report.parity.REFERENCE_RUN``)."""
    import socket

    from teparity.report.parity import REFERENCE_RUN
    from teparity.stack.envprobe import RUN_VARIABLE
    from teparity.stack.provenance import teparity_commit

    return REFERENCE_RUN.format(thunder=thunder or "absent", commit=teparity_commit(), host=socket.gethostname(),
                                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                run=os.environ.get(RUN_VARIABLE, "?")[:8])


def _raised(value: Any) -> bool:
    """Whether a side's result holds a case that raised (``error``, per rank and case): never stored, so that a failure
    of one run (a GPU out of memory, say) is not served to the next."""
    if isinstance(value, (list, tuple)):
        return any(_raised(item) for item in value)
    return getattr(value, "error", None) is not None


def _name(call: Any) -> str:
    from teparity.launch.outcome import qualified_name

    return qualified_name(call[0])


def _plain(call: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return (call[0], call[1])
