#!/usr/bin/env bash
# One GPU-host call of the declared matrix: one or more TE releases' stacks, all side by side (scripts/gpu-matrix.sh
# each), then, side by side, the targeted kill matrix on one stack and every known defect's reproduction on named
# stacks, joined with those stacks' gate reports (`teparity repro-table`). The device returns at most 8 files: each
# release's table (matrix-teV.txt), the repro table, and one archive of the rest, call.tgz.
# usage, from the repository root on the GPU host, with $OUT writable and TEPARITY_COMMIT set:
#   scripts/gpu-call.sh THUNDER_BUILDS.tar.xz TE_VERSION=BUNDLE_DIR...
# A stack is TE_VERSION/THUNDER_VERSION. Environment: KILL (a stack: its kill matrix), KILL_ONLY (mutations: the kill
# matrix's --only), KILL_N (each kill run's xdist workers, default 3), REPRO (stacks: every reproduction on each),
# GATE_N (each gate's xdist workers, default 2: 16 cores over 7 to 9 stacks), CALL_S (default
# 570: the whole call's bound in seconds), REPRO_JOBS (default 4: reproductions at a time on a stack).
set -u
BUILDS=${1:?thunder builds}; shift
[ $# -gt 0 ] || { echo "usage: scripts/gpu-call.sh THUNDER_BUILDS.tar.xz TE_VERSION=BUNDLE_DIR..." >&2; exit 2; }
: "${TEPARITY_COMMIT:?}" "${OUT:?}"
export PYTHONUNBUFFERED=1
start=$(date +%s); W=/tmp/call; rm -rf "$W"; mkdir -p "$W/kill" "$W/repro"
elapsed() { echo $(( $(date +%s) - start )); }
for release in "$@"; do
  TE=${release%%=*}; mkdir -p "$W/te-$TE"
  ( OUT=$W/te-$TE timeout 420 scripts/gpu-matrix.sh "$TE" "${release#*=}" "$BUILDS" --timeout-s 360 -- -n "${GATE_N:-2}"
    echo "matrix TE $TE: exit $? at $(elapsed) s" >> "$W/call.log" ) &
done
wait
left=$(( ${CALL_S:-570} - $(elapsed) ))
site() { echo "/tmp/thunder-builds-${1%%/*}/${1#*/}:/tmp/te-site-${1%%/*}:$PWD/src"; }
name() { echo "te${1%%/*}-th${1#*/}"; }
if [ -n "${KILL:-}" ]; then
  ( PYTHONPATH=$(site "$KILL") timeout "$left" python3 -m teparity kill-matrix tests/trace tests/numerics tests/features \
      tests/ddp tests/fsdp --workdir "$W/kill/work" --jobs 4 --first-kill --targeted ${KILL_ONLY:+--only "$KILL_ONLY"} \
      --pytest-args "-n ${KILL_N:-3} -p no:cacheprovider --tb=short" > "$W/kill/killmatrix-$(name "$KILL").txt" 2>&1
    echo "kill-matrix: exit $? at $(elapsed) s (limit $left s)" >> "$W/kill/killmatrix-$(name "$KILL").txt" ) &
fi
for S in ${REPRO:-}; do
  ( PYTHONPATH=$(site "$S") timeout "$left" python3 -m teparity repro --all --jobs "${REPRO_JOBS:-4}" \
      --json "$W/repro/repro-$(name "$S").json" > "$W/repro/repro-$(name "$S").txt" 2>&1
    echo "repro --all: exit $? at $(elapsed) s" >> "$W/repro/repro-$(name "$S").txt" ) &
done
wait
echo "kill matrix and repros done at $(elapsed) s" >> "$W/call.log"
if [ -n "${REPRO:-}" ]; then
  mkdir -p /tmp/stacks && for packed in "$W"/te-*/stacks.tgz; do tar xzf "$packed" -C /tmp/stacks; done
  # With a stack's site, as every teparity command here: teparity imports its own dependencies (looseversion), which
  # the host's Python lacks and the bundles bring.
  read -r first _ <<< "$REPRO"
  PYTHONPATH=$(site "$first") python3 -m teparity repro-table --repros "$W"/repro/*.json --gate /tmp/stacks/te*-th*.json \
    --out "$OUT/repro-table.md" > "$W/repro/repro-table.txt" 2>&1
  echo "repro-table: exit $?" >> "$W/repro/repro-table.txt"
fi
for release in "$@"; do TE=${release%%=*}; cp "$W/te-$TE/matrix.txt" "$OUT/matrix-te$TE.txt"; done
(cd "$W" && tar czf "$OUT/call.tgz" call.log te-* repro kill/*.txt \
   $(find kill/work -maxdepth 1 \( -name "*.json" -o -name "*.log" \) 2>/dev/null))
echo "packed at $(elapsed) s"
