"""Run a function on N ranks with torch.distributed and gather plain-data results; fail loudly, never hang.

``run_ranks(fn, *args)`` spawns ``world_size`` processes (``torch.multiprocessing`` spawn context), each
joining a process group that rendezvouses through a fresh file in its own work directory (no ports:
safe with several pytest-xdist workers at once), calls ``fn(rank, world_size, *args)`` and returns the
ranks' results in rank order. ``fn`` must be importable by qualified name (module level in
``src/teparity``) and return picklable plain data.

Failures come back as one ``RanksFailed`` naming every failing rank: its traceback if it raised, its
exit code or signal if it died, and its Python stack (faulthandler, on SIGUSR1) if it was still running
at the harness deadline or a grace period after another rank failed. Every rank is killed before this
returns, and each rank also dies with its parent (``PR_SET_PDEATHSIG``).

Under torchrun (``torchrun --nproc-per-node=N -m pytest ... -p no:xdist``) a run of N ranks joins the
existing process group instead: each torchrun process is one rank, calls ``fn`` itself and all-gathers
the results. Then the process-group timeout is the only hang defence, and both sides of a parity run
share each process (one-rank runs still spawn fresh processes).
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import faulthandler
import multiprocessing.connection
import os
import pickle
import shlex
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

DEFAULT_TIMEOUT_S = 180.0
#: The process-group timeout: shorter than the harness deadline, so NCCL/gloo raise first when they can.
DEFAULT_PG_TIMEOUT_S = 60.0
#: How long the other ranks may run on once one rank has failed (they are usually stuck in a collective).
FAILURE_GRACE_S = 10.0
STACK_DUMP_WAIT_S = 2.0
LOG_TAIL_LINES = 80
_PR_SET_PDEATHSIG = 1

Backend = Literal["gloo", "nccl"]


@dataclasses.dataclass(frozen=True)
class RankFailure:
    rank: int
    #: raised | exited | signaled | hung
    kind: str
    summary: str
    detail: str


class RanksFailed(AssertionError):
    """One or more ranks raised, died or hung. ``failures`` has one entry per failing rank."""

    def __init__(self, failures: list[RankFailure], *, pids: list[int], header: str, footer: str) -> None:
        self.failures = failures
        self.pids = pids
        blocks = [f"--- rank {f.rank}: {f.summary} ---\n{f.detail.rstrip()}" for f in failures]
        super().__init__("\n".join([header, *blocks, footer]))


def torchrun_world() -> tuple[int, int] | None:
    """(rank, world size) of this process when torchrun started it, else None."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def default_backend(world_size: int) -> Backend:
    """NCCL with one GPU per rank when there are enough GPUs, else gloo (docs/design.md, "Backend")."""
    from teparity.envprobe import environment

    return "nccl" if len(environment().gpus) >= world_size else "gloo"


def _die_with_parent(parent_pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)


def start_rank(rank: int, world_size: int, workdir: str, parent_pid: int) -> Any:
    """The evidence a rank keeps from its first instant: it dies with its parent, and its output, a crash
    trace and (on SIGUSR1) every thread's stack go to ``workdir/rank{rank}.log``. Returns the log."""
    _die_with_parent(parent_pid)
    log = open(Path(workdir) / f"rank{rank}.log", "w", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    os.environ.pop("TORCHELASTIC_RUN_ID", None)  # a spawned rank is never a torchrun process
    return log


def join_group(rank: int, world_size: int, backend: Backend, workdir: str, pg_timeout_s: float, *, preload: bool = False) -> None:
    """Apply injected mutations and join the process group through a rendezvous file in ``workdir``; with
    ``preload`` (a warm rank, which pays it once) import TE and thunder first. Each step's time goes to
    the log."""
    clock = time.monotonic()
    timings = []

    def took(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings.append(f"{what} {now - clock:.2f} s")
        clock = now

    import torch
    import torch.distributed as dist

    took("import torch")
    if preload:
        from teparity.versions import installed_version

        if installed_version("transformer_engine") is not None and torch.cuda.is_available():
            import transformer_engine.pytorch  # noqa: F401

            took("import transformer_engine")
        import thunder  # noqa: F401

        took("import thunder")
    from teparity import mutations

    mutations.apply_from_env()
    if backend == "nccl":
        torch.cuda.set_device(rank)
    if preload and torch.cuda.is_available():
        torch.cuda.init()
        took("CUDA init")
    dist.init_process_group(
        backend,
        init_method=f"file://{Path(workdir) / 'rendezvous'}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=pg_timeout_s),
    )
    took(f"{backend} process group")
    print(f"teparity rank {rank} start-up: {', '.join(timings)}", flush=True)


def reset_between_sides() -> None:
    """What couples two runs in one process, reset before each: TE's global FP8 state and amax buffers,
    torch's compile caches, the RNG, freed memory. Fresh ranks run it too, so both kinds start alike."""
    import gc

    import torch

    if "transformer_engine.pytorch" in sys.modules:
        from teparity.versions import fp8_global_state_manager

        fp8_global_state_manager().reset()
    if "torch._dynamo" in sys.modules:  # nothing compiled before dynamo was imported
        torch._dynamo.reset()
    torch.manual_seed(0)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _rank_main(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    rank: int,
    world_size: int,
    backend: Backend,
    workdir: str,
    pg_timeout_s: float,
    parent_pid: int,
) -> None:
    """Entry point of one fresh rank: set up evidence capture, join the group, run ``fn``, write the result."""
    log = start_rank(rank, world_size, workdir, parent_pid)
    try:
        join_group(rank, world_size, backend, workdir, pg_timeout_s)
        reset_between_sides()
        pickled = pickle.dumps({"ok": fn(rank, world_size, *args)})
    except BaseException:
        pickled = pickle.dumps({"error": traceback.format_exc()})
    tmp = Path(workdir) / f"rank{rank}.result.tmp"
    tmp.write_bytes(pickled)
    tmp.rename(Path(workdir) / f"rank{rank}.result")
    log.flush()
    if "error" in pickle.loads(pickled):
        os._exit(1)  # skip destroy_process_group: peers may be stuck in a collective with this rank
    import torch.distributed as dist

    dist.destroy_process_group()


def log_tail(workdir: Path, rank: int) -> str:
    path = workdir / f"rank{rank}.log"
    if not path.exists():
        return "(no log)"
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-LOG_TAIL_LINES:]) or "(empty log)"


def rerun_line() -> str:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        return f"re-run: {shlex.join([sys.executable, *sys.argv])}"
    nodeid = current.rsplit(" (", 1)[0]
    return f"re-run: python -m pytest {shlex.quote(nodeid)} -p no:xdist"


def run_ranks(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int = 2,
    backend: Backend | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    pg_timeout: float | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` fresh ranks and return their results."""
    __tracebackhide__ = True
    import torch.multiprocessing as torch_mp

    backend = backend or default_backend(world_size)
    pg_timeout = pg_timeout if pg_timeout is not None else min(DEFAULT_PG_TIMEOUT_S, timeout / 2)
    if (joined := torchrun_world()) is not None and world_size > 1:
        if world_size != joined[1]:
            raise RuntimeError(
                f"under torchrun with WORLD_SIZE={joined[1]} a run asked for {world_size} ranks "
                f"(pass --teparity-world-size {joined[1]}, or leave it unset)"
            )
        return _run_joined(fn, args, backend, pg_timeout)
    root = Path(workdir) if workdir is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="ranks-", dir=root))
    context = torch_mp.get_context("spawn")
    processes = [
        context.Process(
            target=_rank_main,
            args=(fn, args, rank, world_size, backend, str(run_dir), pg_timeout, os.getpid()),
            name=f"teparity-rank{rank}",
        )
        for rank in range(world_size)
    ]
    still_running: dict[int, str] = {}
    try:
        for process in processes:
            process.start()
        still_running = _supervise(processes, run_dir, timeout)
    finally:
        started = [p for p in processes if p.pid is not None]
        for process in started:
            if process.is_alive():
                process.kill()
        for process in started:
            process.join(timeout=10)

    results: list[Any] = []
    failures: list[RankFailure] = []
    for rank, process in enumerate(processes):
        result_path = run_dir / f"rank{rank}.result"
        payload = pickle.loads(result_path.read_bytes()) if result_path.exists() else None
        if rank in still_running:
            failures.append(RankFailure(rank, "hung", still_running[rank], log_tail(run_dir, rank)))
        elif payload is not None and "error" in payload:
            failures.append(RankFailure(rank, "raised", "raised", payload["error"]))
        elif process.exitcode is not None and process.exitcode < 0:
            name = signal.Signals(-process.exitcode).name
            failures.append(RankFailure(rank, "signaled", f"killed by signal {name}", log_tail(run_dir, rank)))
        elif payload is None:
            summary = f"exited with code {process.exitcode} and no result"
            failures.append(RankFailure(rank, "exited", summary, log_tail(run_dir, rank)))
        else:
            results.append(payload["ok"])
    if failures:
        raise RanksFailed(
            failures,
            pids=[p.pid for p in processes if p.pid is not None],
            header=(
                f"{len(failures)} of {world_size} ranks failed ({fn.__module__}.{fn.__qualname__}, "
                f"backend {backend}, harness deadline {timeout:g} s, process-group timeout {pg_timeout:g} s)"
            ),
            footer=f"{rerun_line()}\nrank logs: {run_dir}",
        )
    return results


_joined_setup_done = False


def _run_joined(fn: Callable[..., Any], args: tuple[Any, ...], backend: Backend, pg_timeout: float) -> list[Any]:
    """This process is one torchrun rank: run ``fn`` here, all-gather every rank's result or traceback."""
    __tracebackhide__ = True
    global _joined_setup_done
    import torch
    import torch.distributed as dist

    from teparity import mutations

    rank, world_size = torchrun_world()  # type: ignore[misc]
    if not dist.is_initialized():
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=pg_timeout))
    if not _joined_setup_done:
        mutations.apply_from_env()
        _joined_setup_done = True
    try:
        reset_between_sides()  # both sides of a pair share this process
        payload: dict[str, Any] = {"ok": fn(rank, world_size, *args)}
    except Exception:
        payload = {"error": traceback.format_exc()}
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, payload)
    failures = [RankFailure(r, "raised", "raised", p["error"]) for r, p in enumerate(gathered) if "error" in p]
    if failures:
        raise RanksFailed(
            failures, pids=[],
            header=f"{len(failures)} of {world_size} torchrun ranks failed ({fn.__module__}.{fn.__qualname__}, backend {backend})",
            footer=rerun_line(),
        )
    return [p["ok"] for p in gathered]


def leave_joined_group() -> None:
    """Destroy the torchrun process group this module joined (all ranks together), if it did."""
    if _joined_setup_done:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def _supervise(processes: list[Any], run_dir: Path, timeout: float) -> dict[int, str]:
    """Wait for the ranks; return {rank: why} for those still running at the deadline (stacks dumped)."""
    start = time.monotonic()
    deadline = start + timeout
    failed_at: float | None = None
    while True:
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            return {}
        now = time.monotonic()
        if failed_at is None and any(_has_failed(p, rank, run_dir) for rank, p in enumerate(processes)):
            failed_at = now
            deadline = min(deadline, now + FAILURE_GRACE_S)
        if now >= deadline:
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=min(0.5, deadline - now))
    why = hang_reason(timeout, after_failure=failed_at is not None)
    dump_stacks(p.pid for p in alive)
    return {processes.index(p): why for p in alive}


def hang_reason(timeout: float, *, after_failure: bool) -> str:
    """Why a rank still running is reported as hung (its stack follows in its log)."""
    why = (
        f"hung: still running {FAILURE_GRACE_S:g} s after another rank failed"
        if after_failure
        else f"hung: still running at the harness deadline ({timeout:g} s)"
    )
    return why + "; its Python stack (faulthandler):"


def dump_stacks(pids: Iterable[int | None]) -> None:
    """Ask each rank for every thread's stack (faulthandler, on SIGUSR1) and give them time to write it."""
    for pid in pids:
        try:
            if pid is not None:
                os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    time.sleep(STACK_DUMP_WAIT_S)


def _has_failed(process: Any, rank: int, run_dir: Path) -> bool:
    if process.exitcode not in (None, 0):
        return True
    result_path = run_dir / f"rank{rank}.result"
    return process.exitcode == 0 and not result_path.exists()
