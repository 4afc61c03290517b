"""``python -m teparity``: ``doctor`` (what this machine can run, and why not), ``matrix`` (parity
reports merged into a markdown compatibility table), ``kill-matrix`` (the gate clean and under each
applicable mutation from teparity.mutations), ``known-defects`` (the registry as markdown), ``bench``
(the gate with fresh, warm, forked and served ranks: wall times, ratios, identical verdicts), ``repeat`` (the
gate N times: every verdict or number that changed), ``serve`` (a command whose pytest runs fork their
ranks from one fork server), ``bisect`` (the first thunder build or TE release
between a good and a bad one whose verdict changes) and ``durations`` (the expected test durations that
order a run under ``-n``, from parity reports' timelines)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from teparity.gate.matrix import compatibility_matrix
from teparity.gate.ranges import AXES, Axis, Run
from teparity.gate.report import ParityReport
from teparity.option_types import positive, whole_number
from teparity.stack import reasons
from teparity.tools.bench import MODES
from teparity.tools.bisect import PACKAGES, UsageError, valid_version
from teparity.tools.repeat import ResumeError


def doctor() -> int:
    """What the gate would see here: the probe runs in the ranks' environment (``launch.rank_env``), as the
    gate's does, so its verdict is the gate's and its cache is the one the gate's next run reads."""
    from teparity.gate.ranks import default_backend
    from teparity.launch import rank_env
    from teparity.stack.envprobe import environment, new_run

    set_here = rank_env.apply_defaults()
    new_run()
    env = environment()
    print(env.versions.describe())
    print("GPUs:", ", ".join(g.describe() for g in env.gpus) or "none")
    for info in env.executors.values():
        print("TE executor", info.label())
    tiers = {
        "trace tier (tests/trace)": reasons.no_backward_sync(env),
        "numerics tier (tests/numerics)": reasons.no_fp8(env),
        "ddp tier (tests/ddp)": reasons.no_fp8(env),
        "GPU harness (tests/harness -m fp8)": reasons.no_fp8(env),
    }
    for tier, reason in tiers.items():
        print(f"{tier}: {'runs' if reason is None else 'skips: ' + reason}")
    print(f"multi-rank backend for 2 ranks: {default_backend(2)}")
    if env.fork_error:
        print(f"forked ranks: no, warm ranks instead: {env.fork_error}")
    else:
        print(f"forked ranks: the fork server imports {env.fork_preload()}")
    print("rank environment:", ", ".join(f"{k}={v}" for k, v in rank_env.in_force(set_here).items()))
    return 0


def matrix(paths: list[Path], output: Path | None, axis: Axis = "te") -> int:
    runs = []
    for path in paths:
        try:
            report = ParityReport.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            reason = error.strerror if isinstance(error, OSError) and error.strerror else f"{type(error).__name__}: {error}"
            print(f"python -m teparity matrix: {path}: {reason}", file=sys.stderr)
            return 2
        # With an output file, each report is linked relative to where the table is written.
        link = os.path.relpath(path, output.parent) if output is not None else str(path)
        runs.append(Run(_source(path), link, report))
    table = compatibility_matrix(runs, axis) + "\n"
    if output is None:
        sys.stdout.write(table)
    else:
        output.write_text(table)
    return 0


def durations(paths: list[Path], output: Path | None) -> int:
    """Each test's longest duration over the reports' timelines, in seconds (a test run on several stacks
    is expected to take its longest)."""
    longest: dict[str, float] = {}
    for path in paths:
        try:
            timeline = ParityReport.from_json(json.loads(path.read_text())).timeline
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"python -m teparity durations: {path}: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
        if not timeline:
            print(f"python -m teparity durations: {path}: no timeline (a report written before teparity kept one)", file=sys.stderr)
            return 2
        for test in timeline["tests"]:
            longest[test["nodeid"]] = max(longest.get(test["nodeid"], 0.0), round(test["duration_s"], 1))
    text = json.dumps(dict(sorted(longest.items())), indent=0) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
    return 0


def _source(path: Path) -> str:
    """The run a report came from: its folder, and its file name where a folder holds several."""
    return path.parent.name if path.stem == "parity-report" else f"{path.parent.name}/{path.stem}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teparity", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="what this machine can run, and why not")
    merge = commands.add_parser("matrix", help="merge parity reports into a markdown compatibility table")
    merge.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    merge.add_argument("-o", "--output", type=Path, help="write the table here instead of stdout")
    merge.add_argument("--along", choices=AXES, default="te",
                       help="the version that varies along a row of identical verdicts (default te; thunder for one TE)")
    kills = commands.add_parser("kill-matrix", help="run the gate clean and under every applicable mutation")
    kills.add_argument("paths", nargs="*", default=["tests/trace", "tests/numerics", "tests/features", "tests/ddp", "tests/fsdp"])
    kills.add_argument("--workdir", type=Path, help="reports and pytest temp dirs (default: a new temp dir)")
    kills.add_argument("--pytest-args", default="", help='extra pytest arguments, e.g. "-n 2"')
    kills.add_argument("--jobs", type=int, default=1, help="mutants run at a time, after the clean run (default 1)")
    kills.add_argument("--first-kill", action="store_true",
                       help="stop each mutant's run at its first failure (--maxfail=1): names one killer, not all")
    commands.add_parser("known-defects", help="the known upstream defects registry as markdown")
    timing = commands.add_parser("bench", usage="%(prog)s [options] -- PYTEST ARGS", help="the gate with fresh, warm, forked and served ranks: wall times, ratios, identical verdicts")
    timing.add_argument("--workdir", type=Path, help="bench.json, every report and log (default: a new temp dir)")
    timing.add_argument("--modes", type=_modes, default=MODES, metavar="M,M",
                        help=f"the launch modes to compare, in this order (default {','.join(MODES)})")
    timing.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="time the first mode cold: no untimed run first to fill the caches that outlive a run")
    _standby_option(timing, "the served mode's fork server")
    again = commands.add_parser("repeat", usage="%(prog)s [options] N -- PYTEST ARGS", help="the gate N times in a row: every test whose verdict or evidence changed")
    again.add_argument("count", type=_at_least_two, metavar="N", help="how many runs (N >= 2)")
    again.add_argument("--workdir", type=Path, help="repeat.json, every report and log (default: a new temp dir)")
    again.add_argument("--server-per-run", action="store_true",
                       help="each run starts its own fork server, as a lone run does (default: one serves every run)")
    again.add_argument("--deadline-s", type=positive(float), metavar="S",
                       help="start no run that would end more than S seconds from now (the longest run so far is the guess); "
                       "--resume continues")
    again.add_argument("--resume", action="store_true",
                       help="continue the repeat in --workdir up to N runs, judging the new runs with its earlier ones")
    _standby_option(again, "the fork server of the runs")
    serving = commands.add_parser("serve", usage="%(prog)s [options] -- COMMAND [ARGS]",
                                  help="run COMMAND (a shell, a script) with one fork server for every pytest run it starts")
    serving.add_argument("--workdir", type=Path, help="the fork server's socket and log (default: a new temp dir)")
    _standby_option(serving, "the fork server")
    bisecting = commands.add_parser("bisect", usage="%(prog)s [options] --good BUILD --bad BUILD -- PYTEST ARGS", help="the first build between a good and a bad one whose gate verdict changes")
    bisecting.add_argument("--package", choices=PACKAGES, default="lightning-thunder")
    bisecting.add_argument("--good", required=True, type=valid_version, help="a build that passes the tests")
    bisecting.add_argument("--bad", required=True, type=valid_version, help="a build that fails them (older than --good: find the fix)")
    bisecting.add_argument("--wheels", type=Path, help="candidates from this folder of wheels instead of the index")
    bisecting.add_argument("--workdir", type=Path, help="bisect.json, bisect.txt, builds/, each step's report and log (default: a new temp dir)")
    bisecting.add_argument("--entry", metavar="ID", help="judge each build by this known defect alone (bad: it shows, in its range or as a "
                           "near miss; good: its tests pass; another failure: skip); run without --runxfail")
    expect = commands.add_parser("durations", help="expected test durations (the longest-first order under -n) from parity reports' timelines")
    expect.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    expect.add_argument("-o", "--output", type=Path, help="write the JSON here (teparity/gate/durations.json) instead of stdout")
    # What follows the first "--" goes to pytest as it is; split here, since an argparse remainder after a
    # positional (repeat's N) would swallow the options that follow it too.
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    if pytest_args and args.command not in ("bench", "repeat", "bisect", "serve"):
        parser.error(f"{args.command} takes no pytest arguments after --")
    if args.command == "serve":
        if not pytest_args:
            serving.error("name the command to run after --, e.g. -- bash")
        return serve_command(pytest_args, args.workdir, args.standby_ranks)
    if args.command == "bisect":
        try:
            return bisect_command(args.package, args.good, args.bad, pytest_args, args.wheels, args.workdir, args.entry)
        except UsageError as error:
            bisecting.error(str(error))
    if args.command == "repeat":
        if not pytest_args:
            again.error("name the tests to run after --, e.g. -- -n 8")
        if args.resume and args.workdir is None:
            again.error("--resume needs the --workdir of the repeat to continue")
        try:
            return repeat_command(args.count, pytest_args, args.workdir, args.server_per_run, args.resume, args.deadline_s,
                                  args.standby_ranks)
        except ResumeError as error:
            again.error(str(error))
    if args.command == "bench":
        return bench_command(pytest_args, args.workdir, args.modes, args.warmup, args.standby_ranks)
    if args.command == "doctor":
        return doctor()
    if args.command == "durations":
        return durations(args.reports, args.output)
    if args.command == "known-defects":
        from teparity.known.registry import markdown

        sys.stdout.write(markdown())
        return 0
    if args.command == "kill-matrix":
        return kill_matrix_command(args.paths, args.workdir, args.pytest_args, args.jobs, args.first_kill)
    return matrix(args.reports, args.output, args.along)


def _standby_option(parser: argparse.ArgumentParser, server: str) -> None:
    from teparity.tools.served import default_standby_ranks

    parser.add_argument("--standby-ranks", type=_not_negative, default=default_standby_ranks(), metavar="N",
                        help=f"ranks {server} keeps forked ahead, each having imported thunder, initialised CUDA and "
                        f"run TE's first FP8 steps before a run takes it (default: two per core, at most 32: {default_standby_ranks()}; "
                        "0: none)")


_not_negative = whole_number(0, "must be 0 or more, got {}")
_at_least_two = whole_number(2, "a repeat needs at least 2 runs, got {}")


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(text.split(","))
    if any(mode not in MODES for mode in modes) or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"distinct names from {', '.join(MODES)}, comma-separated; got {text!r}")
    return modes


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


def kill_matrix_command(paths: list[str], workdir: Path | None, pytest_args: str, jobs: int, first_kill: bool = False) -> int:
    import shlex

    from teparity.tools.killmatrix import kill_matrix

    workdir = _workdir(workdir, "teparity-kills-")
    table, ok = kill_matrix(paths, workdir, shlex.split(pytest_args), jobs, progress=_progress, first_kill=first_kill)
    print(table)
    print(f"reports: {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
