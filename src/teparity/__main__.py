"""``python -m teparity COMMAND``: the commands around the gate (``teparity.cli``)."""

from __future__ import annotations

import argparse
import sys

from teparity.cli import doctor, reports, runs
from teparity.cli.parser import TAKE_DASHES, parser
from teparity.option_types import UsageError
from teparity.tools.repeat import ResumeError


def main(argv: list[str] | None = None) -> int:
    top, own = parser()
    # What follows the first "--" goes to pytest as it is; split here, since an argparse remainder after a
    # positional (repeat's N) would swallow the options that follow it too.
    argv = sys.argv[1:] if argv is None else argv
    ours, after = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = top.parse_args(ours)
    if after and args.command not in TAKE_DASHES:
        top.error(f"{args.command} takes no pytest arguments after --")
    try:
        return _run(args, after, own)
    except (UsageError, ResumeError) as error:
        own[args.command].error(str(error))


def _run(args: argparse.Namespace, after: list[str], own: dict[str, argparse.ArgumentParser]) -> int:
    """The command's exit status; a usage error of its own is raised as ``UsageError``."""
    command = args.command
    if command == "serve" and not after:
        raise UsageError("name the command to run after --, e.g. -- bash")
    if command == "repeat" and not after:
        raise UsageError("name the tests to run after --, e.g. -- -n 8")
    if command == "repeat" and args.resume and args.workdir is None:
        raise UsageError("--resume needs the --workdir of the repeat to continue")
    if command == "doctor":
        return doctor.doctor()
    if command == "known-defects":
        return reports.known_defects(write_seen=args.write_seen)
    if command == "mutations":
        return reports.mutations()
    if command == "repro-table":
        return reports.repro_table_command(args.repros, args.gate, args.out)
    if command == "repro":
        return reports.repro_command(args.entry, args.out, args.issue, args.run_all, args.jobs, args.json, args.timeout_s)
    if command == "summary":
        return reports.summary(args.report, args.exit_status, args.failed_step, args.base)
    if command == "diff":
        return reports.diff(args.before, args.after, numbers=args.numbers)
    if command == "matrix":
        return reports.matrix(args.reports, args.output, args.along)
    if command == "durations":
        return reports.durations(args.reports, args.output)
    if command == "kill-matrix":
        return runs.kill_matrix_command(args.paths, args.workdir, args.pytest_args, args.jobs, args.first_kill, args.targeted,
                                        args.only)
    if command == "bench":
        return runs.bench_command(after, args.workdir, args.modes, args.warmup, args.standby_ranks)
    if command == "repeat":
        return runs.repeat_command(args.count, after, args.workdir, args.server_per_run, args.resume, args.deadline_s,
                                   args.standby_ranks)
    if command == "serve":
        return runs.serve_command(after, args.workdir, args.standby_ranks)
    if command == "run-matrix":
        return runs.run_matrix_command(args.matrix, args.te, args.thunder, args.list, after, args.wheels, args.te_site,
                                       args.workdir, args.jobs, args.timeout_s, cpu=args.cpu)
    return runs.bisect_command(args.package, args.good, args.bad, after, args.wheels, args.workdir, args.entry)


if __name__ == "__main__":
    sys.exit(main())
