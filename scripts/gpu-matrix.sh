#!/usr/bin/env bash
# One TE release's stacks of the declared matrix (matrix.toml) side by side on an offline GPU host, from a bundle
# folder holding that TE (installed by its install_bundle.sh into a site folder: teparity ships no TE build) and a
# tar.xz of thunder builds' contents (a folder per version, each the unpacked wheel: a host call carries little).
# usage, from the repository root, with $OUT a writable folder and TEPARITY_COMMIT naming the checkout's commit:
#   scripts/gpu-matrix.sh TE_VERSION BUNDLE_DIR THUNDER_BUILDS.tar.xz [run-matrix options]
# Writes to $OUT: machine.txt, install.log, matrix.txt (the run-matrix table), matrix.json, compatibility.md and
# stacks.tgz (each stack's parity report and log).
set -u
TE=${1:?TE version}; BUNDLE=${2:?bundle folder}; BUILDS=${3:?thunder builds tar.xz}; shift 3
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; echo "cores: $(nproc)"; } > "$OUT/machine.txt" 2>&1
for packed in "$BUNDLE"/*.so.xz; do [ -e "${packed%.xz}" ] || xz -dk "$packed"; done   # a prebuilt extension, carried packed
source "$BUNDLE/install_bundle.sh" "$BUNDLE" /tmp/te-site > "$OUT/install.log" 2>&1 || { echo "TE install failed" >> "$OUT/install.log"; exit 1; }
export PYTHONPATH=$PWD/src:/tmp/te-site   # the runner imports teparity; each gate gets its thunder build first
rm -rf /tmp/thunder-builds /tmp/thunder-wheels && mkdir -p /tmp/thunder-builds /tmp/thunder-wheels
xz -dc "$BUILDS" | tar xf - -C /tmp/thunder-builds
for d in /tmp/thunder-builds/*/; do v=$(basename "$d")
  (cd "$d" && python3 -m zipfile -c "/tmp/thunder-wheels/lightning_thunder-$v-py3-none-any.whl" thunder "lightning_thunder-$v.dist-info")
done
rm -rf /tmp/matrix   # a warm host keeps an earlier call's stacks
python3 -m teparity run-matrix --te "$TE" --wheels /tmp/thunder-wheels --te-site /tmp/te-site --workdir /tmp/matrix "$@" > "$OUT/matrix.txt" 2>&1
status=$?
echo "run-matrix exit $status" >> "$OUT/matrix.txt"
cp /tmp/matrix/matrix.json /tmp/matrix/compatibility.md "$OUT/" 2>/dev/null
(cd /tmp/matrix && tar czf "$OUT/stacks.tgz" *.json *.log)
exit $status
