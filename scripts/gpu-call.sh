#!/usr/bin/env bash
# One GPU-host run of the declared matrix: one TE release's stacks side by side (scripts/gpu-matrix.sh), then, side by
# side, the targeted kill matrix on one of its stacks and every known defect's reproduction on the named stacks, joined
# with those stacks' gate reports (`teparity repro-table`). The device returns at most 8 files: all but the table, the
# matrix and the repro table travel in one archive, $OUT/call-te$TE.tgz.
# usage, from the repository root on the GPU host, with $OUT writable and TEPARITY_COMMIT set:
#   scripts/gpu-call.sh TE_VERSION BUNDLE_DIR THUNDER_BUILDS.tar.xz KILL_THUNDER|- [REPRO_THUNDER...]
# A thunder version names /tmp/thunder-builds/VERSION (unpacked by gpu-matrix.sh) before the bundle's site. CALL_S
# (default 570) bounds the whole run in seconds; REPRO_JOBS (default 4) reproductions run at a time on each stack.
set -u
TE=${1:?TE version}; BUNDLE=${2:?bundle}; BUILDS=${3:?thunder builds}; KILL=${4:?kill-matrix thunder or -}; shift 4
: "${TEPARITY_COMMIT:?}" "${OUT:?}"
export PYTHONUNBUFFERED=1
start=$(date +%s); W=/tmp/call; rm -rf "$W"; mkdir -p "$W/matrix" "$W/kill" "$W/repro"
elapsed() { echo $(( $(date +%s) - start )); }
OUT=$W/matrix timeout 420 scripts/gpu-matrix.sh "$TE" "$BUNDLE" "$BUILDS" --timeout-s 360
echo "matrix: exit $? at $(elapsed) s" >> "$W/call.log"
left=$(( ${CALL_S:-570} - $(elapsed) ))
site() { echo "/tmp/thunder-builds/$1:/tmp/te-site:$PWD/src"; }
if [ "$KILL" != - ]; then
  ( PYTHONPATH=$(site "$KILL") timeout "$left" python3 -m teparity kill-matrix tests/trace tests/numerics tests/features \
      tests/ddp tests/fsdp --workdir "$W/kill/work" --jobs 4 --first-kill --targeted \
      --pytest-args "-n 3 -p no:cacheprovider --tb=short" > "$W/kill/killmatrix-te$TE-th$KILL.txt" 2>&1
    echo "kill-matrix: exit $? at $(elapsed) s (limit $left s)" >> "$W/kill/killmatrix-te$TE-th$KILL.txt" ) &
fi
for V in "$@"; do
  ( PYTHONPATH=$(site "$V") timeout "$left" python3 -m teparity repro --all --jobs "${REPRO_JOBS:-4}" --json "$W/repro/repro-te$TE-th$V.json" \
      > "$W/repro/repro-te$TE-th$V.txt" 2>&1
    echo "repro --all: exit $? at $(elapsed) s" >> "$W/repro/repro-te$TE-th$V.txt" ) &
done
wait
echo "kill matrix and repros done at $(elapsed) s" >> "$W/call.log"
if [ $# -gt 0 ]; then
  mkdir -p /tmp/stacks && tar xzf "$W/matrix/stacks.tgz" -C /tmp/stacks
  PYTHONPATH=/tmp/te-site:$PWD/src python3 -m teparity repro-table --repros "$W"/repro/*.json --gate /tmp/stacks/*.json \
    --out "$OUT/repro-table-te$TE.md" > "$W/repro/repro-table.txt" 2>&1
  echo "repro-table: exit $?" >> "$W/repro/repro-table.txt"
fi
cp "$W/matrix/matrix.txt" "$OUT/matrix-te$TE.txt"
(cd "$W" && tar czf "$OUT/call-te$TE.tgz" call.log matrix repro kill/*.txt \
   $(cd "$W" && find kill/work -maxdepth 1 \( -name "*.json" -o -name "*.log" \) 2>/dev/null))
echo "packed at $(elapsed) s"
