#!/usr/bin/env bash
# One TE release's stacks of the declared matrix (matrix.toml) side by side on an offline GPU host, from a bundle
# folder holding that TE (installed by its install_bundle.sh into a site folder: teparity ships no TE build) and a
# tar.xz of thunder builds' contents (a folder per version, each the unpacked wheel: a host call carries little).
# Every folder it makes is the release's own (/tmp/te-site-TE, /tmp/thunder-builds-TE, /tmp/matrix-TE), so that two
# releases run side by side.
# usage, from the repository root, with $OUT a writable folder and TEPARITY_COMMIT naming the checkout's commit:
#   scripts/gpu-matrix.sh TE_VERSION BUNDLE_DIR THUNDER_BUILDS.tar.xz [run-matrix options]
# Writes to $OUT: machine.txt, install.log, matrix.txt (the run-matrix table), matrix.json, compatibility.md and
# stacks.tgz (each stack's parity report and log).
set -u
TE=${1:?TE version}; BUNDLE=${2:?bundle folder}; BUILDS=${3:?thunder builds tar.xz}; shift 3
# A host's copy of the tree may keep the git metadata of an earlier call: only this names the commit that runs.
: "${TEPARITY_COMMIT:?set TEPARITY_COMMIT to the commit of the tree this host runs}" "${OUT:?}"
export TEPARITY_COMMIT
export PYTHONUNBUFFERED=1
SITE=/tmp/te-site-$TE; THUNDERS=/tmp/thunder-builds-$TE; WHEELS=/tmp/thunder-wheels-$TE; WORK=/tmp/matrix-$TE
{ nvidia-smi -L; echo "cores: $(nproc)"; } > "$OUT/machine.txt" 2>&1
for packed in "$BUNDLE"/*.so.xz; do [ -e "${packed%.xz}" ] || xz -dk "$packed"; done   # a prebuilt extension, carried packed
source "$BUNDLE/install_bundle.sh" "$BUNDLE" "$SITE" > "$OUT/install.log" 2>&1 || { echo "TE install failed" >> "$OUT/install.log"; exit 1; }
export PYTHONPATH=$PWD/src:$SITE   # the runner imports teparity; each gate gets its thunder build first
rm -rf "$THUNDERS" "$WHEELS" && mkdir -p "$THUNDERS" "$WHEELS"
xz -dc "$BUILDS" | tar xf - -C "$THUNDERS"
for d in "$THUNDERS"/*/; do v=$(basename "$d")
  (cd "$d" && python3 -m zipfile -c "$WHEELS/lightning_thunder-$v-py3-none-any.whl" thunder "lightning_thunder-$v.dist-info")
done
rm -rf "$WORK"   # a warm host keeps an earlier call's stacks
python3 -m teparity run-matrix --te "$TE" --wheels "$WHEELS" --te-site "$SITE" --workdir "$WORK" "$@" > "$OUT/matrix.txt" 2>&1
status=$?
echo "run-matrix exit $status" >> "$OUT/matrix.txt"
cp "$WORK/matrix.json" "$WORK/compatibility.md" "$OUT/" 2>/dev/null
(cd "$WORK" && tar czf "$OUT/stacks.tgz" *.json *.log)
exit $status
