#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.9.0 bundle (.gpu/te-2.9.0) and the thunder builds (.gpu/thunder-builds.tar.xz):
# the gate on the weekly builds whose verdicts the bisects of call1-04f6fc3 moved into or out of registry ranges,
# which no committed gate run names: 0.2.2.dev0, 0.2.5.dev20250629, 0.2.5.dev20250706, 0.2.5.dev20250817 and
# 0.2.5.dev20250824, five at a time. Each must exit 0 (or fail with a near miss naming the entry and the range).
# Run from the repository root on the device with $OUT and TEPARITY_COMMIT set; writes install.log, summary.txt and
# out.tgz (a call returns at most 8 files).
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/rep /tmp/sum
xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/th
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
r() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  { echo "== $n $(date +%T)"
    timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "^(FAILED|ERROR)|teparity time|passed|failed" /tmp/$n.log | tail -12; } > /tmp/sum/$n.txt
}
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
pids=()
for v in 0.2.2.dev0 0.2.5.dev20250629 0.2.5.dev20250706 0.2.5.dev20250817 0.2.5.dev20250824; do
  r th-$v /tmp/th/$v 280 -n 3 & pids+=($!)
done
wait "${pids[@]}"
cat /tmp/sum/*.txt > $OUT/summary.txt
cd /tmp && tar czf $OUT/out.tgz sum rep *.log
