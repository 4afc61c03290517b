"""The declared matrix (``matrix.toml``) and ``python -m teparity run-matrix``: the file's stacks, its usage errors, the
runner's scheduling (stacks at a time, each gate's share of the cores) and its verdict, where one stack failing leaves
the others running and the matrix red."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from teparity.stack.versions import build_version
from teparity.tools import declared, matrix_run
from teparity.tools.declared import MatrixFileError, Stack
from teparity.tools.matrix_run import StackRun, claimed_versions, gate_processes, run_matrix
from harness import REPO

THUNDER_BUILDS = ["0.2.2", "0.2.3", "0.2.4", "0.2.5", "0.2.6", "0.2.7.dev20251130", "0.2.7.dev20260201"]


def test_the_repository_declares_sixteen_gpu_stacks_and_the_cpu_ones_of_three_torches() -> None:
    stacks = declared.read()
    gpu = [s for s in stacks if s.te is not None]
    expected = {("2.9.0", b) for b in THUNDER_BUILDS} | {("2.20.2", b) for b in THUNDER_BUILDS} | {
        ("2.12.0", "0.2.6"), ("2.12.0", "0.2.7.dev20260201")}
    assert {(s.te, s.thunder) for s in gpu} == expected
    assert len(gpu) == 16 and {s.torch for s in gpu} == {"2.11.0"}
    cpu = {(s.torch, s.thunder) for s in stacks if s.te is None}
    assert cpu == {(t, b) for t in ("2.11.0", "2.12.1") for b in ("0.2.1", *THUNDER_BUILDS)} | {
        ("2.4.1", "0.2.0.dev20240707"), ("2.4.1", "0.2.0.dev20240728")}
    assert Stack("2.12.1", None, "0.2.6").name == "cpu-torch2.12.1-th0.2.6"
    assert declared.DEFAULT == REPO / "matrix.toml"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("torch = '2.11.0'\n", "no [[te]] table"),
        ("torch = '2.11.0'\n[[te]]\nversion = '2.9.0'\nthunder = []\n", "'thunder' must be a non-empty list"),
        ("torch = '2.11.0'\n[[te]]\nversion = '2.9.0'\nthunder = ['0.2.6', '0.2.6']\n", "thunder 0.2.6 with TE 2.9.0 is declared twice"),
        ("torch = '2.11.0'\n[[te]]\nversion = 'two'\nthunder = ['0.2.6']\n", "[[te]] table 1's version: 'two' is not a version"),
        ("torch = 2.11\n[[te]]\nversion = '2.9.0'\nthunder = ['0.2.6']\n", "torch must be a version string, got 2.11"),
        ("torch = '2.11.0'\ncuda = '13'\n", "unknown key(s) cuda"),
        ("torch = '2.11.0'\n[[te]]\nversion = '2.9.0'\nthunder = ['0.2.6']\nthunders = []\n", "unknown key(s) thunders"),
        ("torch = \n", "not TOML"),
    ],
)
def test_a_malformed_matrix_file_names_what_is_wrong(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(MatrixFileError) as raised:
        declared.read(path)
    assert str(raised.value).startswith(f"{path}: ") and said in str(raised.value), raised.value


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "teparity", "run-matrix", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--te", "2.10.0"], "--te 2.10.0: not in"),
        (["--thunder", "0.2.1"], "--thunder 0.2.1: not in"),
        (["--te", "2.12.0", "--thunder", "0.2.2"], "no stack of"),
        (["--matrix", "/nonexistent/matrix.toml"], "/nonexistent/matrix.toml: cannot read it"),
        (["--te", "2.12.0", "--wheels", "/nonexistent"], "--wheels /nonexistent: no such folder"),
    ],
)
def test_run_matrix_refuses_what_it_cannot_run_as_a_usage_error(args: list[str], said: str) -> None:
    run = _cli(*args)
    assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr, run


def test_run_matrix_lists_the_selected_stacks() -> None:
    run = _cli("--te", "2.12.0", "--list")
    assert run.returncode == 0, run
    assert run.stdout.splitlines() == ["te2.12.0-th0.2.6: torch 2.11.0, TE 2.12.0, thunder 0.2.6",
                                       "te2.12.0-th0.2.7.dev20260201: torch 2.11.0, TE 2.12.0, thunder 0.2.7.dev20260201"]


def test_run_matrix_cpu_lists_the_cpu_stacks_of_this_pythons_torch(tmp_path: Path) -> None:
    torch = build_version("torch").split("+")[0]
    run = _cli("--cpu", "--list")
    declared_here = [s for s in declared.read() if s.te is None and s.torch == torch]
    if not declared_here:
        assert run.returncode == 2 and f"declares no CPU stack of torch {torch}" in run.stderr, run
        return
    assert run.returncode == 0 and run.stdout.splitlines() == [
        f"{s.name}: torch {torch}, TE none, thunder {s.thunder}" for s in declared_here], run
    matrix = tmp_path / "matrix.toml"
    matrix.write_text("torch = '2.11.0'\n[[te]]\nversion = '2.9.0'\nthunder = ['0.2.6']\n"
                      "[[cpu]]\ntorch = ['9.9.9']\nthunder = ['0.2.6']\n")
    other = _cli("--matrix", str(matrix), "--cpu", "--list")
    assert other.returncode == 2 and f"declares no CPU stack of torch {torch}" in other.stderr and "9.9.9" in other.stderr
    assert _cli("--cpu", "--te", "2.9.0").returncode == 2


@pytest.mark.parametrize(
    ("args", "jobs", "expected"),
    [([], 7, ["-n", "2"]), ([], 2, ["-n", "8"]), ([], 32, ["-n", "2"]), (["-n", "3"], 7, ["-n", "3"]),
     (["-n3"], 2, ["-n3"]), (["-p", "no:xdist"], 2, ["-p", "no:xdist"]), (["--numprocesses=5"], 2, ["--numprocesses=5"])],
)
def test_each_gate_gets_an_equal_share_of_the_cores_unless_told(args: list[str], jobs: int, expected: list[str]) -> None:
    assert gate_processes(args, jobs, cores=16) == expected


STACKS = (Stack("2.11.0", "2.9.0", "0.2.5"), Stack("2.11.0", "2.9.0", "0.2.6"), Stack("2.11.0", "2.9.0", "0.2.7.dev20260201"))


def test_stacks_run_side_by_side_and_one_red_stack_leaves_the_others_running(tmp_path: Path) -> None:
    """``jobs`` stacks at once (seen running together), every stack run, the matrix red by the one that failed."""
    running, overlap, lock = set(), [], threading.Lock()

    def runner(stack: Stack, workdir: Path, args: list[str], **_: object) -> StackRun:
        with lock:
            running.add(stack)
            overlap.append(len(running))
        time.sleep(0.2)
        with lock:
            running.discard(stack)
        if stack.thunder == "0.2.6":
            return StackRun(stack, returncode=1, seconds=0.2)
        return StackRun(stack, returncode=0, seconds=0.2)

    said: list[str] = []
    result = run_matrix(STACKS, tmp_path, [], jobs=2, progress=said.append, runner=runner)
    assert max(overlap) == 2, overlap
    assert [s["name"] for s in result["stacks"]] == [s.name for s in STACKS]
    assert [s["green"] for s in result["stacks"]] == [True, False, True]
    assert not result["green"] and result["pytest_args"][0] == "-n"
    assert result["summed_s"] == pytest.approx(0.6) and result["ratio"] > 1
    assert json.loads((tmp_path / "matrix.json").read_text())["green"] is False
    assert sorted(said) == sorted([f"{STACKS[0].name}: green in 0.2 s", f"{STACKS[1].name}: RED: exit 1 in 0.2 s",
                                   f"{STACKS[2].name}: green in 0.2 s"])
    assert matrix_run.table(result).splitlines()[-1].endswith(f"teparity matrix: RED ({STACKS[1].name})")


def test_a_report_of_other_versions_than_declared_is_red() -> None:
    stack = Stack("2.11.0", "2.9.0", "0.2.6")
    report = {"environment": {"versions": {"torch": "2.11.0+cu130", "thunder": "0.2.6", "transformer_engine": "2.9.0"}}}
    assert claimed_versions(stack, report) is None
    report["environment"]["versions"].update(thunder="0.2.5", transformer_engine=None)
    assert claimed_versions(stack, report) == "ran thunder 0.2.5 where 0.2.6 is declared, TE None where 2.9.0 is declared"


@pytest.mark.multirank
def test_run_matrix_runs_real_gates_and_is_red_where_a_stack_cannot_be_had(tmp_path: Path) -> None:
    """End to end on this machine: a stack of the installed thunder runs its gate (a few trace tests), and is red since
    it has no TE where it declares one; a stack whose thunder build cannot be installed (no wheel offline) is red with
    pip's reason; the run exits 1 and writes both stacks' records and the compatibility table."""
    from importlib.metadata import version

    thunder = version("lightning-thunder")
    torch = build_version("torch").split("+")[0]  # a stack of another torch would be red for its torch alone
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(f"torch = '{torch}'\n[[te]]\nversion = '2.9.0'\nthunder = ['{thunder}', '0.2.2']\n")
    (tmp_path / "wheels").mkdir()
    run = _cli("--matrix", str(matrix), "--wheels", str(tmp_path / "wheels"), "--workdir", str(tmp_path / "out"),
               "--", "tests/trace/test_legacy_backward_sync.py", "-k", "test_backward_sync_placement and not ranks", "-p", "no:xdist")
    assert run.returncode == 1, run
    result = json.loads((tmp_path / "out" / "matrix.json").read_text())
    ran, missing = result["stacks"]
    assert ran["returncode"] == 0 and ran["counts"]["pass"] >= 1, ran
    assert ran["problem"] == "ran TE None where 2.9.0 is declared", ran
    assert missing["returncode"] is None and "lightning-thunder 0.2.2 could not be installed" in missing["problem"], missing
    assert f"te2.9.0-th{thunder}.json" in (tmp_path / "out" / "compatibility.md").read_text()  # the row links its report
    assert run.stdout.splitlines()[-2].endswith("teparity matrix: RED (te2.9.0-th" + thunder + ", te2.9.0-th0.2.2)")


def _expand(pattern: str) -> list[str]:
    """tox's brace expansion of one ``env_list`` line: every ``{a,b}`` a choice."""
    import itertools
    import re

    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[part] if i % 2 == 0 else part.split(",") for i, part in enumerate(parts)]
    return ["".join(chosen) for chosen in itertools.product(*choices)]


def test_toxs_cpu_environments_are_the_declared_cpu_stacks() -> None:
    """tox.ini's env_list runs each [[cpu]] stack of matrix.toml, as ``th{thunder}-torch{major.minor}``, and no other."""
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    listed = {env for line in tox["tox"]["env_list"].split() for env in _expand(line) if env.startswith("th")}
    torch_factor = {"2.11.0": "2.11", "2.12.1": "2.12", "2.4.1": "2.4"}
    cpu = {f"th{s.thunder}-torch{torch_factor[s.torch]}" for s in declared.read() if s.te is None}
    assert listed == cpu, (sorted(listed - cpu), sorted(cpu - listed))
    for factor, torch in (("torch2.11", "2.11.0"), ("torch2.12", "2.12.1"), ("torch2.4", "2.4.1")):
        assert f"{factor}" in tox["testenv"]["deps"] and f"torch=={torch}" in tox["testenv"]["deps"]
