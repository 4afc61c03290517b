#!/usr/bin/env bash
# The pull-request gate as a PR author meets it, on the CPU: thunder's main branch as a source tree (the files of
# lightning-thunder 0.2.7.dev20260201, version 0.2.7.dev0, a commit of 2026-02-03), installed as a PR's CI installs it
# (pip install DIR), its base's report first, then three PRs: one that changes nothing, one that breaks thunder's DDP
# gradient averaging (the pre-average divides by the world size + 1), and the first against a base run on torch 2.12.1.
# usage, from the repository root, with .venv (torch 2.11.0) and .venv-torch2.12 (torch 2.12.1) as the README makes
# them: bash docs/results/cpu-th0.2.7.dev0-tree-6e91639-pr-gate/run.sh OUT_DIR
set -u
OUT=${1:?output folder}; mkdir -p "$OUT"; W=$(mktemp -d)
export GIT_AUTHOR_NAME=pr GIT_AUTHOR_EMAIL=pr@localhost GIT_COMMITTER_NAME=pr GIT_COMMITTER_EMAIL=pr@localhost
commit() { GIT_AUTHOR_DATE="$1T12:00:00+00:00" GIT_COMMITTER_DATE="$1T12:00:00+00:00" git -C "$W/tree" commit -qam "$2"; }
.venv/bin/pip download -q --no-deps -d "$W/wheel" lightning-thunder==0.2.7.dev20260201
mkdir -p "$W/tree" && (cd "$W/tree" && python3 -m zipfile -e "$W"/wheel/*.whl . && rm -r lightning_thunder-*.dist-info)
sed -i 's/^__version__ = .*/__version__ = "0.2.7.dev0"/' "$W/tree/thunder/__about__.py"
printf '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "lightning-thunder"\nversion = "0.2.7.dev0"\n[tool.setuptools.packages.find]\ninclude = ["thunder*"]\n' > "$W/tree/pyproject.toml"
git -C "$W/tree" init -q && git -C "$W/tree" add -A && commit 2026-02-03 "main"
install() { rm -rf "$W/site" && .venv/bin/pip install -q --no-deps --target "$W/site" "$W/tree" 2>&1 | grep -v WARNING; }
gate() {  # VENV NAME [pytest args]: the README's gate command with this tree's thunder first on the path
  local venv=$1 name=$2; shift 2
  PYTHONPATH="$W/site" "$venv/bin/python" -m pytest -n 2 tests --teparity-report "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
  .venv/bin/python -m teparity summary "$OUT/$name.json" > "$OUT/$name-summary.md"
}
install; gate .venv base
gate .venv-torch2.12 base-torch2.12
echo "# a comment" >> "$W/tree/thunder/__init__.py" && commit 2026-02-04 "a PR that changes nothing"; install
gate .venv pr-nothing --teparity-base "$OUT/base.json"
gate .venv pr-nothing-vs-torch2.12 --teparity-base "$OUT/base-torch2.12.json"
sed -i 's#preaverage_grad = grad / group.size()#preaverage_grad = grad / (group.size() + 1)#' "$W/tree/thunder/distributed/prims.py"
commit 2026-02-05 "a PR that breaks DDP gradient averaging"; install
gate .venv pr-ddp --teparity-base "$OUT/base.json"
for pr in pr-nothing pr-ddp; do .venv/bin/python -m teparity diff "$OUT/base.json" "$OUT/$pr.json" > "$OUT/diff-$pr.txt"; echo "exit $?" >> "$OUT/diff-$pr.txt"; done
.venv/bin/python -m teparity diff "$OUT/base-torch2.12.json" "$OUT/pr-nothing-vs-torch2.12.json" > "$OUT/diff-pr-nothing-vs-torch2.12.txt"; echo "exit $?" >> "$OUT/diff-pr-nothing-vs-torch2.12.txt"
rm -rf "$W"
