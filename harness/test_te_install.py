"""One TransformerEngine install per kind of host (``teparity.stack.te_install``): the core for the CUDA torch was built
with plus the torch extension. The README, the skip reasons (and so ``doctor``), pyproject's ``gpu`` extras and tox
name those lines and no other; TE's published METADATA puts the core behind exactly those extras."""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from teparity.stack import reasons, te_install
from teparity.stack.environment import Environment
from teparity.stack.versions import Versions
from harness import REPO

#: What pip says when it cannot reach the package index, the one case in which the METADATA check skips: it saw no
#: release of transformer-engine at all (PyPI has dozens), or said why it could not connect.
OFFLINE = re.compile(r"\(from versions: none\)|NewConnectionError|Failed to establish a new connection|"
                     r"Temporary failure in name resolution|Network is unreachable|ConnectTimeoutError|ProxyError")
#: Every spelling of a TE install with extras, in the files a user reads or runs.
SPELLED = re.compile(r"transformer[-_]engine\[([^\]]*)\]")


def _tox() -> configparser.ConfigParser:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    return tox


def _declared_te_versions() -> list[str]:
    """The TE releases matrix.toml declares, oldest first."""
    from packaging.version import Version

    from teparity.tools import declared

    return sorted({stack.te for stack in declared.read() if stack.te}, key=Version)


def test_the_readme_the_skip_reasons_the_gpu_extras_and_tox_give_one_install_per_kind_of_host() -> None:
    readme = (REPO / "README.md").read_text()
    for major in te_install.CORE_EXTRAS:
        assert f".venv/bin/{te_install.install_line(major)}" in readme, f"the README's install line for a CUDA {major} torch"
    for cuda, major in (("13.0", 13), ("12.8", 12)):
        env = Environment(Versions("2.11.0", "0.2.6", None), (), {}, None, None, torch_cuda=cuda)
        assert te_install.install_line(major) in reasons.no_te(env), reasons.no_te(env)
    extras = re.search(r"^\[project\.optional-dependencies\]\n(.*?)\n\n", (REPO / "pyproject.toml").read_text(), re.M | re.S).group(1)
    assert f'\ngpu = ["{te_install.requirement(13, None)}"]' in f"\n{extras}", extras
    assert f'\ngpu-cu12 = ["{te_install.requirement(12, None)}"]' in f"\n{extras}", extras
    gpu_env = _tox()["testenv:gpu"]
    install = f'pip install --no-build-isolation --no-cache-dir "{te_install.requirement(13, "{env:TE}")}"'
    assert install in gpu_env["commands_pre"], gpu_env["commands_pre"]
    assert "transformer-engine" not in gpu_env["deps"], "TE comes from the one install line, not from deps"


def test_no_other_te_install_is_spelled_anywhere() -> None:
    allowed = {f"{extra},{te_install.TORCH_EXTRA}" for extra in te_install.CORE_EXTRAS.values()}
    files = [REPO / "README.md", REPO / "tox.ini", REPO / "pyproject.toml", *(REPO / "docs").glob("*.md"),
             *(REPO / "src").rglob("*.py"), *(REPO / "scripts").glob("*")]
    spelled = {f"{path.relative_to(REPO)}: {match}" for path in files if path.is_file()
               for match in SPELLED.findall(path.read_text()) if match not in allowed and "{" not in match}
    assert not spelled, spelled


@pytest.mark.parametrize("version", sorted({te_install.TE_RELEASE, *_declared_te_versions()[-1:]}))
def test_te_metadata_puts_the_core_behind_the_extras_the_install_names(tmp_path: Path, version: str) -> None:
    """The meta-package's METADATA as the index serves it: ``pytorch`` is the torch extension and no core; each
    ``core-cu*`` extra the install names is that CUDA's core, at the same version."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(tmp_path),
                           f"transformer-engine=={version}"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and (offline := OFFLINE.search(done.stdout + done.stderr)):
        pytest.skip(f"the package index cannot be reached (pip: {offline.group(0)}), so TE's METADATA cannot be read")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    wheel = next(tmp_path.glob("transformer_engine-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [Requirement(line.split(":", 1)[1].strip()) for line in metadata.splitlines() if line.startswith("Requires-Dist:")]

    def pulled(extra: str) -> set[str]:
        return {f"{r.name}{r.specifier}" for r in requires if r.marker is not None and r.marker.evaluate({"extra": extra})}

    assert pulled(te_install.TORCH_EXTRA) == {f"transformer_engine_torch=={version}"}, metadata
    for major, extra in te_install.CORE_EXTRAS.items():
        assert pulled(extra) == {f"transformer_engine_cu{major}=={version}"}, (extra, metadata)
