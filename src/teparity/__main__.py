"""``python -m teparity``: ``doctor`` (what this machine can run, and why not), ``matrix`` (parity
reports merged into a markdown compatibility table), ``kill-matrix`` (the gate clean and under each
applicable mutation from teparity.tools.mutations), ``known-defects`` (the registry as markdown), ``bench``
(the gate with fresh ranks, then warm: wall times, ratio, identical verdicts) and ``bisect`` (the first
thunder build or TE release between a good and a bad one whose verdict changes)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from teparity.gate.matrix import compatibility_matrix
from teparity.gate.report import ParityReport
from teparity.tools.bisect import PACKAGES, UsageError, valid_version


def doctor() -> int:
    from teparity.gate.ranks import default_backend
    from teparity.stack.envprobe import environment

    env = environment()
    print(env.versions.describe())
    print("GPUs:", ", ".join(g.describe() for g in env.gpus) or "none")
    for info in env.executors.values():
        print("TE executor", info.label())
    tiers = {
        "trace tier (tests/trace)": env.backward_sync_reason(),
        "numerics tier (tests/numerics)": env.fp8_reason(),
        "ddp tier (tests/ddp)": env.fp8_reason(),
        "GPU harness (tests/harness -m fp8)": env.fp8_reason(),
    }
    for tier, reason in tiers.items():
        print(f"{tier}: {'runs' if reason is None else 'skips: ' + reason}")
    print(f"multi-rank backend for 2 ranks: {default_backend(2)}")
    return 0


def matrix(paths: list[Path], output: Path | None) -> int:
    reports = []
    for path in paths:
        try:
            report = ParityReport.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            reason = error.strerror if isinstance(error, OSError) and error.strerror else f"{type(error).__name__}: {error}"
            print(f"python -m teparity matrix: {path}: {reason}", file=sys.stderr)
            return 2
        # With an output file, each label links to its report, relative to where the table is written.
        link = os.path.relpath(path, output.parent) if output is not None else str(path)
        reports.append((f"[{_source(path)}]({link})", report))
    table = compatibility_matrix(reports) + "\n"
    if output is None:
        sys.stdout.write(table)
    else:
        output.write_text(table)
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
    kills = commands.add_parser("kill-matrix", help="run the gate clean and under every applicable mutation")
    kills.add_argument("paths", nargs="*", default=["tests/trace", "tests/numerics", "tests/ddp"])
    kills.add_argument("--workdir", type=Path, help="reports and pytest temp dirs (default: a new temp dir)")
    kills.add_argument("--pytest-args", default="", help='extra pytest arguments, e.g. "-n 2"')
    kills.add_argument("--jobs", type=int, default=1, help="mutants run at a time, after the clean run (default 1)")
    commands.add_parser("known-defects", help="the known upstream defects registry as markdown")
    timing = commands.add_parser("bench", help="the gate with fresh ranks, then warm: wall times, ratio, identical verdicts")
    timing.add_argument("--workdir", type=Path, help="bench.json, both reports and logs (default: a new temp dir)")
    timing.add_argument("pytest_args", nargs=argparse.REMAINDER, help="pytest arguments (after --), e.g. -- -n 2 tests/ddp")
    bisecting = commands.add_parser("bisect", help="the first build between a good and a bad one whose gate verdict changes")
    bisecting.add_argument("--package", choices=PACKAGES, default="lightning-thunder")
    bisecting.add_argument("--good", required=True, type=valid_version, help="a build that passes the tests")
    bisecting.add_argument("--bad", required=True, type=valid_version, help="a build that fails them (older than --good: find the fix)")
    bisecting.add_argument("--wheels", type=Path, help="candidates from this folder of wheels instead of the index")
    bisecting.add_argument("--workdir", type=Path, help="bisect.json, bisect.txt, builds/, each step's report and log (default: a new temp dir)")
    bisecting.add_argument("pytest_args", nargs=argparse.REMAINDER, help="pytest arguments (after --), e.g. -- tests/trace -p no:xdist")
    args = parser.parse_args(argv)
    if args.command == "bisect":
        pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        try:
            return bisect_command(args.package, args.good, args.bad, pytest_args, args.wheels, args.workdir)
        except UsageError as error:
            bisecting.error(str(error))
    if args.command == "bench":
        pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        return bench_command(pytest_args, args.workdir)
    if args.command == "doctor":
        return doctor()
    if args.command == "known-defects":
        from teparity.gate.known_defects import markdown

        sys.stdout.write(markdown())
        return 0
    if args.command == "kill-matrix":
        return kill_matrix_command(args.paths, args.workdir, args.pytest_args, args.jobs)
    return matrix(args.reports, args.output)


def bench_command(pytest_args: list[str], workdir: Path | None) -> int:
    import tempfile

    from teparity.tools.bench import bench

    workdir = workdir or Path(tempfile.mkdtemp(prefix="teparity-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result, identical = bench(pytest_args, workdir, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(
        f"fresh {result['fresh_s']} s, warm {result['warm_s']} s, fresh/warm {result['ratio']}x; verdicts and evidence "
        f"{'identical' if identical else 'DIFFER: ' + ', '.join(result['differing_tests'] or ['(exit status)'])}"
    )
    print(f"bench.json: {workdir / 'bench.json'}")
    return 0 if identical else 1


def bisect_command(package: str, good: str, bad: str, pytest_args: list[str], wheels: Path | None, workdir: Path | None) -> int:
    import tempfile

    from teparity.tools.bisect import EndpointMismatch, Runner, Step, index_versions, search, wheel_versions, write_log

    if not pytest_args:
        raise UsageError("name the tests to run after --, e.g. -- tests/trace -p no:xdist")
    if package == "transformer-engine" and wheels is None:
        raise UsageError("TE's torch extension is source-only on the index: build TE's wheels for this torch and pass --wheels DIR")
    versions = wheel_versions(wheels, package) if wheels is not None else index_versions(package)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="teparity-bisect-"))
    workdir.mkdir(parents=True, exist_ok=True)
    steps: list[Step] = []
    runner = Runner(package, pytest_args, workdir, wheels, progress=lambda line: print(line, file=sys.stderr, flush=True))

    def logged(version: str) -> Step:
        steps.append(runner(version))
        write_log(workdir, package, good, bad, pytest_args, steps)
        return steps[-1]

    try:
        result = search(versions, good, bad, logged)
    except EndpointMismatch as error:
        print(write_log(workdir, package, good, bad, pytest_args, steps, error=f"an endpoint is not what it was given as: {error}"))
        print(f"bisect log: {workdir / 'bisect.txt'}")
        return 1
    print(write_log(workdir, package, good, bad, pytest_args, steps, result))
    print(f"bisect log: {workdir / 'bisect.txt'}")
    return 0


def kill_matrix_command(paths: list[str], workdir: Path | None, pytest_args: str, jobs: int) -> int:
    import shlex
    import tempfile

    from teparity.tools.killmatrix import kill_matrix

    workdir = workdir or Path(tempfile.mkdtemp(prefix="teparity-kills-"))
    workdir.mkdir(parents=True, exist_ok=True)
    table, ok = kill_matrix(paths, workdir, shlex.split(pytest_args), jobs, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(table)
    print(f"reports: {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
