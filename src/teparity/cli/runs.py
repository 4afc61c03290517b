"""The commands that run the gate as pytest subprocesses: ``bench`` (launch modes compared), ``repeat`` (the gate
N times), ``serve`` (a command whose pytest runs fork their ranks from one fork server), ``bisect`` (the first
build whose verdict changes) and ``kill-matrix`` (the gate clean and under each applicable mutation)."""

from __future__ import annotations

import sys
from pathlib import Path

from teparity.option_types import UsageError


def _workdir(workdir: Path | None, prefix: str) -> Path:
    import tempfile

    workdir = workdir or Path(tempfile.mkdtemp(prefix=prefix))
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def bench_command(pytest_args: list[str], workdir: Path | None, modes: tuple[str, ...], warmup: bool,
                  standby_ranks: int = 0) -> int:
    from teparity.tools.bench import bench

    workdir = _workdir(workdir, "teparity-bench-")
    result, identical = bench(pytest_args, workdir, modes, progress=_progress, warmup=warmup, standby_ranks=standby_ranks)
    times = ", ".join(f"{mode} {seconds} s" for mode, seconds in result["seconds"].items())
    speedups = ", ".join(f"{modes[0]}/{mode} {x}x" for mode, x in result["speedup"].items() if mode != modes[0])
    print(
        f"{times}; {speedups or 'one mode'}; verdicts and evidence "
        f"{'identical' if identical else 'DIFFER: ' + ', '.join(result['differing_tests'] or ['(exit status)'])}"
    )
    print(f"bench.json: {workdir / 'bench.json'}")
    return 0 if identical else 1


def repeat_command(count: int, pytest_args: list[str], workdir: Path | None, server_per_run: bool = False,
                   resume: bool = False, deadline_s: float | None = None, standby_ranks: int = 0) -> int:
    from teparity.tools.repeat import repeat

    workdir = _workdir(workdir, "teparity-repeat-")
    result, stable = repeat(count, pytest_args, workdir, progress=_progress, server_per_run=server_per_run,
                            resume=resume, deadline_s=deadline_s, standby_ranks=standby_ranks)
    done = len(result["runs"])
    if stable:
        print(f"{count} runs, {result['tests']} tests: no verdict or evidence changed")
    elif not result["changed"] and not result["stack_changed"] and len({r["exitstatus"] for r in result["runs"]}) == 1:
        print(f"{done} of {count} runs, {result['tests']} tests: no verdict or evidence changed so far; incomplete "
              f"(continue with --resume --workdir {workdir})")
    else:
        print(f"{done} runs: {len(result['changed'])} tests changed between runs"
              + (" (and the exit statuses differ)" if len({r['exitstatus'] for r in result['runs']}) > 1 else "")
              + (f" (and the stack: {', '.join(result['stack_changed'])})" if result["stack_changed"] else ""))
        for node, versions in result["changed"].items():
            print(f"  {node}")
            for version in versions:
                print(f"    runs {version['runs']}: {version['outcome']}: {version['evidence'][:200]}")
    print(f"repeat.json: {workdir / 'repeat.json'}")
    return 0 if stable else 1


def serve_command(command: list[str], workdir: Path | None, standby_ranks: int = 0) -> int:
    """``command``'s exit status, after running it with one fork server named to every pytest run it starts
    (with ``standby_ranks`` ranks forked ahead); Ctrl-C is the command's to handle (this process waits for
    it, then ends the server)."""
    import signal
    import subprocess

    from teparity.tools.served import served

    workdir = _workdir(workdir, "teparity-serve-")
    with served("python -m teparity serve", workdir, standby_ranks=standby_ranks) as server:
        _progress(f"teparity serve: fork server pid {server.pid} (log {server.log}) for the pytest runs of: "
                  f"{' '.join(command)}")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return subprocess.call(command, env=server.env)
        except OSError as error:
            _progress(f"python -m teparity serve: cannot run {command[0]}: {error.strerror or error}")
            return 127
        finally:
            signal.signal(signal.SIGINT, previous)


def bisect_command(package: str, good: str, bad: str, pytest_args: list[str], wheels: Path | None, workdir: Path | None,
                   entry: str | None = None) -> int:
    from teparity.tools.bisect import EndpointMismatch, Runner, Step, index_versions, search, wheel_versions, write_log

    if not pytest_args:
        raise UsageError("name the tests to run after --, e.g. -- tests/trace -p no:xdist")
    if entry is not None:
        from teparity.known.registry import BY_ID

        if entry not in BY_ID:
            raise UsageError(f"--entry {entry}: no such known defect; the registry has {', '.join(sorted(BY_ID))}")
        if "--runxfail" in pytest_args:
            raise UsageError("--entry judges by the known defect's signature, which --runxfail turns off: leave --runxfail out")
    if package == "transformer-engine" and wheels is None:
        raise UsageError("TE's torch extension is source-only on the index: build TE's wheels for this torch and pass --wheels DIR")
    versions = wheel_versions(wheels, package) if wheels is not None else index_versions(package)
    workdir = _workdir(workdir, "teparity-bisect-")
    steps: list[Step] = []
    runner = Runner(package, pytest_args, workdir, wheels, progress=_progress, entry=entry)

    def logged(version: str) -> Step:
        steps.append(runner(version))
        write_log(workdir, package, good, bad, pytest_args, steps, entry=entry)
        return steps[-1]

    try:
        result = search(versions, good, bad, logged)
    except EndpointMismatch as error:
        print(write_log(workdir, package, good, bad, pytest_args, steps, error=f"an endpoint is not what it was given as: {error}", entry=entry))
        print(f"bisect log: {workdir / 'bisect.txt'}")
        return 1
    print(write_log(workdir, package, good, bad, pytest_args, steps, result, entry=entry))
    print(f"bisect log: {workdir / 'bisect.txt'}")
    return 0


def kill_matrix_command(paths: list[str], workdir: Path | None, pytest_args: str, jobs: int, first_kill: bool = False,
                        targeted: bool = False, only: tuple[str, ...] = ()) -> int:
    import shlex

    from teparity.tools.killmatrix import kill_matrix

    workdir = _workdir(workdir, "teparity-kills-")
    table, ok = kill_matrix(paths, workdir, shlex.split(pytest_args), jobs, progress=_progress, first_kill=first_kill,
                            targeted=targeted, only=only)
    print(table)
    print(f"reports: {workdir}")
    return 0 if ok else 1


def run_matrix_command(matrix: Path, te: list[str] | None, thunder: list[str] | None, only_list: bool, pytest_args: list[str],
                       wheels: Path | None, te_site: Path | None, workdir: Path | None, jobs: int | None,
                       timeout_s: float | None, *, cpu: bool = False) -> int:
    """The selected declared stacks side by side: exit 0 where every one is green, 1 where any is red."""
    from packaging.version import Version

    from teparity.tools.declared import MatrixFileError, read
    from teparity.tools.matrix_run import run_matrix, table

    try:
        declared = tuple(s for s in read(matrix) if (s.te is None) == cpu)
    except MatrixFileError as error:
        raise UsageError(str(error)) from None
    if cpu:
        declared = _this_torchs(declared, matrix, te)
    for name, wanted, have in (("--te", te, {s.te for s in declared}), ("--thunder", thunder, {s.thunder for s in declared})):
        if undeclared := sorted(set(wanted or ()) - have):
            raise UsageError(f"{name} {', '.join(undeclared)}: not in {matrix}, which declares {', '.join(sorted(have, key=Version))}")
    stacks = tuple(s for s in declared if (not te or s.te in te) and (not thunder or s.thunder in thunder))
    if not stacks:
        raise UsageError(f"no stack of {matrix} has both the --te and --thunder asked for")
    if only_list:
        print("\n".join(f"{s.name}: torch {s.torch}, TE {s.te or 'none'}, thunder {s.thunder}" for s in stacks))
        return 0
    for name, folder in (("--wheels", wheels), ("--te-site", te_site)):
        if folder is not None and not folder.is_dir():
            raise UsageError(f"{name} {folder}: no such folder")
    workdir = _workdir(workdir, "teparity-matrix-")
    result = run_matrix(stacks, workdir, pytest_args, jobs=jobs or len(stacks), wheels=wheels and wheels.resolve(),
                        te_site=te_site and str(te_site.resolve()), timeout_s=timeout_s, progress=_progress)
    print(table(result))
    print(f"matrix.json, compatibility.md, each stack's report and log: {workdir}")
    return 0 if result["green"] else 1


def _this_torchs(stacks: tuple, matrix: Path, te: list[str] | None) -> tuple:
    """The CPU stacks of the torch this Python has (``--cpu``); a torch the file declares none for is a usage error."""
    from teparity.stack.versions import build_version

    if te:
        raise UsageError("--cpu runs the stacks without TE: it takes no --te")
    torch = (build_version("torch") or "none").split("+")[0]
    if not (mine := tuple(s for s in stacks if s.torch == torch)):
        declared = ", ".join(sorted({s.torch for s in stacks})) or "none"
        raise UsageError(f"--cpu: {matrix} declares no CPU stack of torch {torch}, the torch of {sys.executable} "
                         f"(its CPU stacks' torches: {declared}): run it with a Python that has one of them")
    return mine
