"""Bad options and files are usage errors that say what is wrong, never a traceback or a failing test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("--teparity-world-size=0", "argument --teparity-world-size: must be positive, got 0"),
        ("--teparity-world-size=two", "argument --teparity-world-size: not a number: 'two'"),
        ("--teparity-timeout=0", "argument --teparity-timeout: must be positive, got 0"),
        ("--teparity-timeout=-5", "argument --teparity-timeout: must be positive, got -5"),
    ],
)
def test_a_bad_option_is_refused_at_startup(pytester: pytest.Pytester, option: str, said: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "teparity.plugin", "-p", "no:cacheprovider", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{said}*"])


def _matrix(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "teparity", "matrix", *paths], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read it: No such file or directory"),
        ("not json", "not a teparity parity report (not JSON: Expecting value: line 1 column 1)"),
        # A report cut short (a full disk, a killed writer): json's own words, said once ("starting at: line ...").
        ('{"schema": "teparity.par', "not a teparity parity report (not JSON: Unterminated string starting at: line 1 column 12)"),
        ('{"schema": "other"}', "not a teparity parity report (schema 'other', expected 'teparity.parity-report/1')"),
        ('{"schema": "teparity.parity-report/1"}', "not a teparity parity report (no 'environment')"),
        ("[1, 2]", "not a teparity parity report ('list' object has no attribute 'get')"),
    ],
)
def test_matrix_names_a_missing_or_malformed_report_and_exits_2(tmp_path: Path, content: str | None, said: str) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    run = _matrix(str(path))
    assert run.returncode == 2, run
    assert run.stderr == f"python -m teparity matrix: {path}: {said}\n", run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize("words", [["repeat", "3", "--workdir", "W"], ["repeat", "--workdir", "W", "3"]])
def test_options_around_repeats_count_are_its_own_and_what_follows_the_dashes_is_pytests(
    words: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An argparse remainder after N once took --workdir for a pytest argument (pytest then exited 4)."""
    from teparity import __main__ as cli
    from teparity.cli import runs

    seen = {}
    monkeypatch.setattr(runs, "repeat_command", lambda count, args, workdir, per_run, resume, deadline, standby: seen.update(
        count=count, args=args, workdir=workdir, per_run=per_run) or 0)
    assert cli.main([*words, "--", "-n", "2", "tests/trace", "--", "x"]) == 0
    assert seen == {"count": 3, "args": ["-n", "2", "tests/trace", "--", "x"], "workdir": Path("W"), "per_run": False}


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--resume"], "--resume needs the --workdir of the repeat to continue"),
        (["--resume", "--workdir", "{tmp}"], "nothing to resume: {tmp}/repeat.json does not exist"),
        (["--deadline-s", "0"], "argument --deadline-s: must be positive, got 0"),
        (["--deadline-s", "soon"], "argument --deadline-s: not a number: 'soon'"),
        (["--standby-ranks", "-1"], "argument --standby-ranks: must be 0 or more, got -1"),
        (["--standby-ranks", "all"], "argument --standby-ranks: not a whole number: 'all'"),
    ],
)
def test_a_repeat_with_nothing_to_resume_or_no_time_is_a_usage_error(tmp_path: Path, words: list[str], said: str) -> None:
    words = [word.format(tmp=tmp_path) for word in words]
    done = subprocess.run([sys.executable, "-m", "teparity", "repeat", "3", *words, "--", "tests/trace"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and said.format(tmp=tmp_path) in done.stderr and "Traceback" not in done.stderr, done


@pytest.mark.parametrize("command", [["repeat", "3"], ["repeat", "3", "--"], ["bisect", "--good", "0.2.6", "--bad", "0.2.5"]])
def test_a_command_that_runs_the_gate_without_its_tests_is_a_usage_error(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "teparity", *command], capture_output=True, text=True)
    assert done.returncode == 2 and "name the tests to run after --" in done.stderr and "Traceback" not in done.stderr, done


def test_serve_without_a_command_is_a_usage_error_and_a_missing_command_exits_127() -> None:
    done = subprocess.run([sys.executable, "-m", "teparity", "serve"], capture_output=True, text=True)
    assert done.returncode == 2 and "name the command to run after --" in done.stderr and "Traceback" not in done.stderr, done
    done = subprocess.run([sys.executable, "-m", "teparity", "serve", "--", "teparity-no-such-command"], capture_output=True, text=True)
    assert done.returncode == 127 and "cannot run teparity-no-such-command" in done.stderr and "Traceback" not in done.stderr, done


def test_pytest_arguments_for_a_command_that_runs_no_pytest_are_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "teparity", "known-defects", "--", "-x"], capture_output=True, text=True)
    assert done.returncode == 2 and "known-defects takes no pytest arguments after --" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot read it: No such file or directory"),
     ("not json", "not a teparity parity report (not JSON: Expecting value: line 1 column 1)")],
)
def test_summary_of_a_missing_or_unreadable_report_exits_2_and_its_markdown_still_says_red(
    tmp_path: Path, content: str | None, said: str
) -> None:
    """The job summary must say red where the gate wrote no report; the command says what is wrong, as a usage error."""
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    run = subprocess.run([sys.executable, "-m", "teparity", "summary", str(path), "--exit-status", "4"], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr == f"python -m teparity summary: {path}: {said}\n", run
    assert run.stdout.startswith(f"## teparity: RED (exit 4, usage error): no parity report\n\n`{path}`: {said}."), run.stdout


@pytest.mark.parametrize(
    ("words", "heading"),
    [(["--exit-status", ""], "## teparity: RED (the gate did not run): the step that runs it did not run"),
     (["--exit-status", "", "--failed-step", "Install teparity failed (exit 1)\nERROR: no such package"],
      "## teparity: RED (the gate did not run): Install teparity failed (exit 1)\n\n```\nERROR: no such package\n```")],
)
def test_summary_of_a_gate_that_did_not_run_is_red_whatever_report_lies_there(tmp_path: Path, words: list[str], heading: str) -> None:
    """A CI step before the gate failed (its exit status output is then empty): an older report at the path, green
    or not, is not this run's."""
    from teparity.report.parity import ParityReport

    path = tmp_path / "report.json"
    ParityReport(environment={}, exitstatus=0).write(path)
    run = subprocess.run([sys.executable, "-m", "teparity", "summary", str(path), *words], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith(heading), run
    bad = subprocess.run([sys.executable, "-m", "teparity", "summary", str(path), "--exit-status", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "argument --exit-status: an exit status (a whole number, or empty: the gate did not run); got 'x'" in bad.stderr
