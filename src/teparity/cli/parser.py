"""The options of ``python -m teparity``'s commands; what follows the first ``--`` is pytest's (or, for
``serve``, the command to run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from teparity.tools.ranges import AXES
from teparity.option_types import positive, whole_number
from teparity.tools.bench import MODES, REFERENCE_MODES
from teparity.tools.bisect import PACKAGES, valid_version

DESCRIPTION = """The commands around the teparity gate: doctor (what this machine can run, and why not), matrix (parity
reports merged into a markdown compatibility table), diff (what two parity reports judged differently), kill-matrix (the gate clean and under each applicable
mutation), known-defects (the registry as markdown), repro (a known defect's standalone reproduction; --all: every one run here), repro-table (those verdicts beside the gate's), mutations (the mutation catalog as markdown), summary (a report as markdown for a CI job), bench (the gate with fresh, warm, forked and served ranks:
wall times, ratios, identical verdicts), repeat (the gate N times: every verdict or number that changed), serve (a
command whose pytest runs fork their ranks from one fork server), bisect (the first thunder build or TE release
between a good and a bad one whose verdict changes), durations (the expected test durations that order a run
under -n, from parity reports' timelines) and run-matrix (the declared stacks of matrix.toml side by side, then their
compatibility table)."""
#: The commands that take arguments after ``--``.
TAKE_DASHES = ("bench", "repeat", "bisect", "serve", "run-matrix")
_not_negative = whole_number(0, "must be 0 or more, got {}")
_at_least_two = whole_number(2, "a repeat needs at least 2 runs, got {}")


def parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser and each command's own (its ``error`` is that command's usage error)."""
    top = argparse.ArgumentParser(prog="python -m teparity", description=DESCRIPTION)
    commands = top.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="what this machine can run, tier by tier, and why not")
    registry = commands.add_parser("known-defects", help="the known upstream defects registry as markdown")
    registry.add_argument("--write-seen", action="store_true",
                          help="derive the newest stack each defect was seen on from the reports under docs/results/ and "
                          "write src/teparity/known/seen.json (after committing a run)")
    commands.add_parser("mutations", help="the mutation catalog as markdown: each regression and the checks that kill it")
    reproducing = commands.add_parser("repro", help="a known defect's standalone reproduction (torch, thunder and TE "
                                      "only): the script, or with --issue an upstream issue's body with a run here")
    reproducing.add_argument("entry", metavar="ID", nargs="?", help="a registry entry's id (python -m teparity known-defects)")
    reproducing.add_argument("--out", type=Path, help="write the script here (default: print it)")
    reproducing.add_argument("--issue", action="store_true", help="print a Markdown issue body: the environment, the "
                             "script and what it printed when run here")
    reproducing.add_argument("--all", dest="run_all", action="store_true", help="run every reproduction here, each in "
                             "a process of its own: a line per entry (verdict, seconds, last line); exit 0 whatever they say")
    reproducing.add_argument("--jobs", type=positive(int), metavar="N", help="with --all: reproductions at a time (default 1)")
    reproducing.add_argument("--json", type=Path, metavar="FILE", help="with --all: write the versions and each verdict here "
                             "(python -m teparity repro-table reads it)")
    reproducing.add_argument("--timeout-s", type=positive(float), metavar="S", help="with --all: stop a reproduction "
                             "after S seconds (default 600; its verdict is then TIMED OUT)")
    own = {"summary": _summary(commands), "diff": _diff(commands), "matrix": _matrix(commands), "durations": _durations(commands), "kill-matrix": _kill_matrix(commands),
           "bench": _bench(commands), "repeat": _repeat(commands), "serve": _serve(commands), "bisect": _bisect(commands),
           "run-matrix": _run_matrix(commands), "repro": reproducing, "repro-table": _repro_table(commands)}
    return top, own


def _summary(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    summing = commands.add_parser("summary", help="a parity report as markdown for a CI job's summary: the table and "
                                  "every failure's evidence")
    summing.add_argument("report", type=Path, metavar="REPORT.json")
    summing.add_argument("--exit-status", type=_exit_status, metavar="N",
                         help="the gate's exit status (default: the report's); empty: the gate did not run, and the "
                         "summary is red whatever REPORT.json holds")
    summing.add_argument("--base", type=Path, metavar="BASE.json",
                         help="the base's report the gate was given (--teparity-base): where REPORT.json is missing "
                         "because the base's is, the summary names the base's and says what to do")
    summing.add_argument("--failed-step", metavar="TEXT",
                         help="a CI step before the gate that failed, and the tail of its output: the summary is red and "
                         "says so (the gate did not run)")
    return summing


#: ``--exit-status ''``: the gate did not run (a CI step output that was never set).
GATE_DID_NOT_RUN = ""


def _exit_status(text: str) -> int | str:
    if text.strip() == GATE_DID_NOT_RUN:
        return GATE_DID_NOT_RUN
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an exit status (a whole number, or empty: the gate did not run); got {text!r}") from None


def _diff(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    compare = commands.add_parser("diff", help="the tests two parity reports judged differently: regressed, fixed, "
                                  "changed, new and removed (exit 1 where one regressed)")
    compare.add_argument("before", type=Path, metavar="BEFORE.json")
    compare.add_argument("after", type=Path, metavar="AFTER.json")
    compare.add_argument("--numbers", action="store_true", help="also the tests of one outcome whose numbers moved (the "
                         "largest difference per kind of tensor, before and after); their evidence's words never count")
    return compare


def _matrix(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    merge = commands.add_parser("matrix", help="merge parity reports into a markdown compatibility table")
    merge.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    merge.add_argument("-o", "--output", type=Path, help="write the table here instead of stdout")
    merge.add_argument("--along", choices=AXES, default="te",
                       help="the version that varies along a row of identical verdicts (default te; thunder for one TE)")
    return merge


def _durations(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    expect = commands.add_parser("durations", help="expected test durations (the longest-first order under -n) from "
                                 "parity reports' timelines")
    expect.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    expect.add_argument("-o", "--output", type=Path, help="write the JSON here (teparity/gate/durations.json) instead of stdout")
    return expect


def _kill_matrix(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    kills = commands.add_parser("kill-matrix", help="run the gate clean and under every applicable mutation")
    kills.add_argument("paths", nargs="*", default=["tests/trace", "tests/numerics", "tests/features", "tests/ddp", "tests/fsdp"])
    kills.add_argument("--workdir", type=Path, help="reports and pytest temp dirs (default: a new temp dir)")
    kills.add_argument("--pytest-args", default="", help='extra pytest arguments, e.g. "-n 2"')
    kills.add_argument("--jobs", type=int, default=1, help="mutants run at a time, beside the clean run (default 1)")
    kills.add_argument("--first-kill", action="store_true",
                       help="stop each mutant's run at its first failure (--maxfail=1): names one killer, not all")
    kills.add_argument("--targeted", action="store_true",
                       help="run each mutant's catalog killed_by rows first (--teparity-rows), the whole gate only where "
                       "they do not kill it (a row then says: catalog drift); the clean run is always whole")
    kills.add_argument("--only", type=_mutation_names, default=(), metavar="NAME,NAME",
                       help="these mutations of the catalog alone (the ones a change adds), beside the clean run")
    return kills


def _mutation_names(text: str) -> tuple[str, ...]:
    """Comma-separated names of the mutation catalog; a usage error names an unknown one and the catalog."""
    from teparity.mutations.catalog import CATALOG

    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names or (unknown := [name for name in names if name not in CATALOG]):
        raise argparse.ArgumentTypeError(f"no mutation named {', '.join(unknown) if names else '(none given)'}; the catalog: "
                                         f"{', '.join(sorted(CATALOG))}")
    return names


def _bench(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    timing = commands.add_parser("bench", usage="%(prog)s [options] -- PYTEST ARGS",
                                 help="the gate with fresh, warm, forked and served ranks: wall times, ratios, identical verdicts")
    timing.add_argument("--workdir", type=Path, help="bench.json, every report and log (default: a new temp dir)")
    timing.add_argument("--modes", type=_modes, default=MODES, metavar="M,M",
                        help=f"the launch modes to compare, in this order (default {','.join(MODES)}); also "
                        f"{' and '.join(REFERENCE_MODES)}: served with a reference store, empty before stored, filled before "
                        "reused (a stack's first and second run)")
    timing.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="time the first mode cold: no untimed run first to fill the caches that outlive a run")
    _standby_option(timing, "the served mode's fork server")
    return timing


def _repeat(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    again = commands.add_parser("repeat", usage="%(prog)s [options] N -- PYTEST ARGS",
                                help="the gate N times in a row: every test whose verdict or evidence changed")
    again.add_argument("count", type=_at_least_two, metavar="N", help="how many runs (N >= 2)")
    again.add_argument("--workdir", type=Path, help="repeat.json, every report and log (default: a new temp dir)")
    again.add_argument("--server-per-run", action="store_true",
                       help="each run starts its own fork server, as a lone run does (default: one serves every run)")
    again.add_argument("--deadline-s", type=positive(float), metavar="S",
                       help="start no run that would end more than S seconds from now (the longest run so far is the "
                       "guess); --resume continues")
    again.add_argument("--resume", action="store_true",
                       help="continue the repeat in --workdir up to N runs, judging the new runs with its earlier ones")
    _standby_option(again, "the fork server of the runs")
    return again


def _serve(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    serving = commands.add_parser("serve", usage="%(prog)s [options] -- COMMAND [ARGS]",
                                  help="run COMMAND (a shell, a script) with one fork server for every pytest run it starts")
    serving.add_argument("--workdir", type=Path, help="the fork server's socket and log (default: a new temp dir)")
    _standby_option(serving, "the fork server")
    return serving


def _bisect(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    bisecting = commands.add_parser("bisect", usage="%(prog)s [options] --good BUILD --bad BUILD -- PYTEST ARGS",
                                    help="the first build between a good and a bad one whose gate verdict changes")
    bisecting.add_argument("--package", choices=PACKAGES, default="lightning-thunder")
    bisecting.add_argument("--good", required=True, type=valid_version, help="a build that passes the tests")
    bisecting.add_argument("--bad", required=True, type=valid_version,
                           help="a build that fails them (older than --good: find the fix)")
    bisecting.add_argument("--wheels", type=Path, help="candidates from this folder of wheels instead of the index")
    bisecting.add_argument("--workdir", type=Path,
                           help="bisect.json, bisect.txt, builds/, each step's report and log (default: a new temp dir)")
    bisecting.add_argument("--entry", metavar="ID", help="judge each build by this known defect alone (bad: it shows, in "
                           "its range or as a near miss; good: its tests pass; another failure: skip); run without --runxfail")
    return bisecting


def _repro_table(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    joining = commands.add_parser("repro-table", help="each reproduction's verdict (repro --all --json) beside the gate's "
                                  "word for its entry on the same stack: a markdown table; exit 1 where they disagree")
    joining.add_argument("--repros", nargs="+", type=Path, required=True, metavar="R.json", help="repro --all --json runs")
    joining.add_argument("--gate", nargs="+", type=Path, required=True, metavar="G.json",
                         help="parity reports (--teparity-report), one per stack (thunder and TE versions)")
    joining.add_argument("--out", type=Path, metavar="FILE.md", help="write the table here (default: print it)")
    return joining


def _run_matrix(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from teparity.tools.declared import DEFAULT

    running = commands.add_parser("run-matrix", usage="%(prog)s [options] [-- PYTEST ARGS]",
                                  help="the declared stacks (matrix.toml) side by side, each in a site folder of its "
                                  "own, then their compatibility table")
    running.add_argument("--matrix", type=Path, default=DEFAULT, metavar="FILE", help=f"the declared matrix (default {DEFAULT.name} "
                         "of this checkout)")
    running.add_argument("--te", action="append", metavar="VERSION", help="only this TE release's stacks (repeatable; "
                         "default every stack: one host usually has one TE)")
    running.add_argument("--cpu", action="store_true", help="the CPU stacks (no TE) of the torch this Python has, in "
                         "place of the GPU stacks (one Python has one torch: run it once per declared torch)")
    running.add_argument("--thunder", action="append", metavar="VERSION", help="only these thunder builds (repeatable)")
    running.add_argument("--list", action="store_true", help="print the selected stacks and exit")
    running.add_argument("--wheels", type=Path, metavar="DIR", help="install thunder from this folder of wheels, offline "
                         "(default: the package index)")
    running.add_argument("--te-site", type=Path, metavar="DIR", help="a folder holding the stacks' TE (pip install --target), "
                         "put on the gate's PYTHONPATH after the thunder build (default: the interpreter's own TE)")
    running.add_argument("--workdir", type=Path, help="matrix.json, compatibility.md, each stack's report, log and site "
                         "(default: a new temp dir)")
    running.add_argument("--jobs", type=positive(int), metavar="N", help="stacks at a time (default: all selected)")
    running.add_argument("--timeout-s", type=positive(float), metavar="S", help="stop a stack's gate after S seconds "
                         "(it is then red)")
    return running


def _standby_option(parser: argparse.ArgumentParser, server: str) -> None:
    from teparity.tools.served import default_standby_ranks

    parser.add_argument("--standby-ranks", type=_not_negative, default=default_standby_ranks(), metavar="N",
                        help=f"ranks {server} keeps forked ahead, each having imported thunder, initialised CUDA and "
                        f"run TE's first FP8 steps before a run takes it (default: two per core, at most 32: "
                        f"{default_standby_ranks()}; 0: none)")


def _modes(text: str) -> tuple[str, ...]:
    modes, known = tuple(text.split(",")), (*MODES, *REFERENCE_MODES)
    if any(mode not in known for mode in modes) or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"distinct names from {', '.join(known)}, comma-separated; got {text!r}")
    return modes
