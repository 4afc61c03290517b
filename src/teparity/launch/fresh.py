"""Fresh ranks: ``run_ranks(fn, *args, world_size=N, backend=...)`` spawns N processes (``torch.multiprocessing``
spawn context), each of which joins a process group, calls ``fn(rank, world_size, *args)`` and returns
picklable plain data; the results come back in rank order. ``fn`` must be importable by qualified name.

Failures come back as one ``RanksFailed`` naming every failing rank: its traceback if it raised, its
exit code or signal if it died, and its Python stack (faulthandler, on SIGUSR1) if it was still running
at the harness deadline or a grace period after another rank failed. The deadline counts from when every
rank has joined the process group: start-up (spawn, torch's import, the rendezvous) is the machine's, which
a loaded runner stretches, and has a limit of its own (``START_DEADLINE_S``). Every rank is killed before
this returns, and each rank also dies with its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import multiprocessing.connection
import os
import pickle
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teparity.launch.outcome import (
    DEFAULT_TIMEOUT_S,
    FAILURE_GRACE_S,
    START_DEADLINE_S,
    Backend,
    RankFailure,
    RanksFailed,
    dump_stacks,
    ended,
    failed_header,
    hang_reason,
    log_tail,
    pg_timeout_for,
    qualified_name,
    rank_traceback,
    rerun_line,
    task_line,
)
from teparity.launch.rank import join_group, start_rank


def _rank_main(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    rank: int,
    world_size: int,
    backend: Backend,
    workdir: str,
    pg_timeout_s: float,
    parent_pid: int,
    label: str,
) -> None:
    """Entry point of one fresh rank: set up evidence capture, join the group, run ``fn``, write the result."""
    log = start_rank(rank, workdir, parent_pid)
    try:
        join_group(rank, world_size, backend, Path(workdir) / "rendezvous", pg_timeout_s)
        (Path(workdir) / f"rank{rank}.joined").touch()
        clock = time.monotonic()
        try:
            pickled = pickle.dumps({"ok": fn(rank, world_size, *args)})
        finally:
            print(task_line(label, time.monotonic() - clock), flush=True)
    except BaseException:
        pickled = pickle.dumps({"error": rank_traceback()})
    tmp = Path(workdir) / f"rank{rank}.result.tmp"
    tmp.write_bytes(pickled)
    tmp.rename(Path(workdir) / f"rank{rank}.result")
    log.flush()
    if "error" in pickle.loads(pickled):
        os._exit(1)  # skip destroy_process_group: peers may be stuck in a collective with this rank
    import torch.distributed as dist

    dist.destroy_process_group()


def run_ranks(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int,
    backend: Backend,
    timeout: float = DEFAULT_TIMEOUT_S,
    pg_timeout: float | None = None,
    workdir: str | os.PathLike[str] | None = None,
    label: str | None = None,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` fresh ranks and return their results.
    ``label`` names the run in a failure (default: ``fn``'s qualified name)."""
    __tracebackhide__ = True
    import torch.multiprocessing as torch_mp

    pg_timeout = pg_timeout_for(timeout, pg_timeout)
    root = Path(workdir) if workdir is not None else Path(tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="ranks-", dir=root))
    context = torch_mp.get_context("spawn")
    processes = [
        context.Process(
            target=_rank_main,
            args=(fn, args, rank, world_size, backend, str(run_dir), pg_timeout, os.getpid(), label or qualified_name(fn)),
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

    results, failures = _collect(processes, run_dir, still_running)
    if failures:
        raise RanksFailed(
            failures,
            pids=[p.pid for p in processes if p.pid is not None],
            header=failed_header(len(failures), world_size, label or qualified_name(fn), backend, timeout, pg_timeout),
            footer=f"{rerun_line()}\nfresh ranks; rank logs: {run_dir}",
        )
    return results


def _collect(processes: list[Any], run_dir: Path, still_running: dict[int, str]) -> tuple[list[Any], list[RankFailure]]:
    """Each rank's result, or its failure: hung (``still_running``), raised (its traceback), or ended without a
    result (its exit code or signal)."""
    results: list[Any] = []
    failures: list[RankFailure] = []
    for rank, process in enumerate(processes):
        result_path = run_dir / f"rank{rank}.result"
        payload = pickle.loads(result_path.read_bytes()) if result_path.exists() else None
        if rank in still_running:
            failures.append(RankFailure(rank, "hung", still_running[rank], log_tail(run_dir, rank)))
        elif payload is not None and "error" in payload:
            failures.append(RankFailure(rank, "raised", "raised", payload["error"]))
        elif payload is None or (process.exitcode is not None and process.exitcode < 0):
            failures.append(ended(rank, process.exitcode, run_dir))
        else:
            results.append(payload["ok"])
    return results, failures


def _supervise(processes: list[Any], run_dir: Path, timeout: float) -> dict[int, str]:
    """Wait for the ranks; return {rank: why} for those still running at the deadline (stacks dumped): ``timeout``
    seconds after every rank joined the group, or the start-up limit while some have not."""
    start_limit = max(timeout, START_DEADLINE_S)
    deadline = time.monotonic() + start_limit
    joined_at: float | None = None
    failed_at: float | None = None
    while True:
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            return {}
        now = time.monotonic()
        if joined_at is None and failed_at is None and all(
                (run_dir / f"rank{rank}.joined").exists() for rank in range(len(processes))):
            joined_at = now
            deadline = now + timeout
        if failed_at is None and any(_has_failed(p, rank, run_dir) for rank, p in enumerate(processes)):
            failed_at = now
            deadline = min(deadline, now + FAILURE_GRACE_S)
        if now >= deadline:
            break
        multiprocessing.connection.wait([p.sentinel for p in alive], timeout=min(0.5, deadline - now))
    if failed_at is None and joined_at is None:
        why = f"hung: still starting (imports, joining the group) {start_limit:g} s after it was spawned; its Python stack (faulthandler):"
    else:
        why = hang_reason(timeout, after_failure=failed_at is not None, since="every rank joined the process group")
    dump_stacks(p.pid for p in alive)
    return {processes.index(p): why for p in alive}


def _has_failed(process: Any, rank: int, run_dir: Path) -> bool:
    if process.exitcode not in (None, 0):
        return True
    result_path = run_dir / f"rank{rank}.result"
    return process.exitcode == 0 and not result_path.exists()
