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
from packaging.version import Version

from teparity.stack.versions import build_version
from teparity.tools import declared, matrix_run
from teparity.tools.declared import MatrixFileError, Stack
from teparity.tools.matrix_run import StackRun, claimed_versions, gate_processes, run_matrix
from harness import REPO

def test_the_repository_declares_gpu_stacks_on_one_torch_and_cpu_stacks() -> None:
    stacks = declared.read()
    gpu = [s for s in stacks if s.te is not None]
    assert gpu and len({s.torch for s in gpu}) == 1 and any(s.te is None for s in stacks)
    assert Stack("2.12.1", None, "0.2.6").name == "cpu-torch2.12.1-th0.2.6"
    assert declared.DEFAULT == REPO / "matrix.toml"


#: Files that are what matrix.toml and the committed runs make (regenerated, never edited), or the runs themselves.
DERIVED = ("docs/results/", "docs/compatibility.md", "docs/known-defects.md", "src/teparity/known/seen.json", "matrix.toml")


def test_a_release_added_to_matrix_toml_alone_is_complete(tmp_path: Path) -> None:
    """Supporting the next release is one line in matrix.toml (then its run): no tracked file lists the declared releases
    or a table's builds by hand, run-matrix takes the new stacks, and the registry holds on them what it holds on the
    newest declared stacks (ranges end only where a fix was seen: docs/version-matrix.md)."""
    import subprocess

    from teparity.known.registry import registered_for
    from teparity.stack.versions import Versions

    stacks = declared.read()
    releases = sorted({s.te for s in stacks if s.te})
    tables = {te: [s.thunder for s in stacks if s.te == te] for te in releases}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    listing = []
    for path in tracked:
        if path.startswith(DERIVED) or not (REPO / path).is_file():
            continue
        try:
            lines = (REPO / path).read_text().splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, 1):
            if all(te in line for te in releases) or any(len(b) > 2 and all(f"{x}," in line or f"{x} " in line or f"{x}\"" in line
                                                                          for x in b) for b in tables.values()):
                listing.append(f"{path}:{number}")
    assert not listing, f"a hand-kept list of declared versions: {listing}"
    matrix = tmp_path / "matrix.toml"
    matrix.write_text((REPO / "matrix.toml").read_text() + '\n[[te]]\nversion = "2.21.0"\nthunder = ["0.2.8.dev20260301"]\n')
    listed = _cli("--matrix", str(matrix), "--te", "2.21.0", "--list")
    assert listed.returncode == 0 and listed.stdout.startswith("te2.21.0-th0.2.8.dev20260301: torch "), listed
    newest = max((s for s in stacks if s.te), key=lambda s: (Version(s.te), Version(s.thunder)))
    held = set(registered_for(Versions(torch=newest.torch, thunder=newest.thunder, transformer_engine=newest.te)))
    assert held and held <= set(registered_for(Versions(torch=newest.torch, thunder="0.2.8.dev20260301", transformer_engine="2.21.0")))


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


def test_run_matrix_lists_the_selected_stacks(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text("torch = '2.11.0'\n[[te]]\nversion = '2.9.0'\nthunder = ['0.2.5']\n"
                      "[[te]]\nversion = '2.12.0'\nthunder = ['0.2.6', '0.2.7.dev20260201']\n")
    run = _cli("--matrix", str(matrix), "--te", "2.12.0", "--list")
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


def test_tox_names_no_version_matrix_toml_is_the_one_list() -> None:
    """tox.ini takes every version from the environment (``TORCH``, ``THUNDER``, ``TE``), so a release added to
    matrix.toml runs through tox without an edit here."""
    import re

    text = "\n".join(line for line in (REPO / "tox.ini").read_text().splitlines() if not line.startswith("#"))
    assert not re.findall(r"(?:torch|thunder|transformer-engine[^=]*)==\d", text), "a pinned version in tox.ini"
    assert "torch=={env:TORCH:" in text and "lightning-thunder=={env:THUNDER:" in text and "=={env:TE}" in text
