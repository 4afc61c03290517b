#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.9.0 bundle (.gpu/te-2.9.0, .gpu/thunder-rel, .gpu/thunder-dev,
# .gpu/thunder-new): first two diagnostics (fork_and_first_run.py: after which import a forked child cannot
# run CUDA; what a process's first TE linear costs); then the whole gate on thunder 0.2.2 .. 0.2.6, a 0.2.6
# pre-release and two weekly builds no earlier run named, three at a time at -n 4 (issue 23). Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set; writes summary.txt, reports.tgz, logs.tgz.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
for w in .gpu/thunder-rel/*.whl .gpu/thunder-new/*.whl .gpu/thunder-dev/*.whl; do
  v=$(basename $w | cut -d- -f2)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/th-$v $w >> $OUT/install.log 2>&1
done
rm -rf /tmp/rep /tmp/sum /tmp/bt-*; mkdir -p /tmp/rep /tmp/sum
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
D=docs/plans/fork_and_first_run.py
# r NAME THUNDER_PATH LIMIT_S PYTEST_ARGS...: one gate run; its summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  { echo "== $n $(date +%T)"
    timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "teparity time|passed|failed" /tmp/$n.log | tail -2; } > /tmp/sum/$n.txt
}
vmstat -t 1 > /tmp/vmstat.txt 2>&1 &
{ nproc; nvidia-smi -L; echo "== fork (thunder 0.2.6)"; timeout 60 python3 $D fork 2>&1 | grep -v -i warn
  echo "== fork (thunder 0.2.7.dev20260201)"; PYTHONPATH=/tmp/th-0.2.7.dev20260201:$BASE timeout 60 python3 $D fork 2>&1 | grep -v -i warn
  echo "== first-run"; timeout 60 python3 $D first-run 2>&1 | grep -v -i warn; } > /tmp/sum/00-diagnostics.txt
# at most 570 s in all: a batch starts only while its limit fits
batch() {
  local lim=$(( $1 - SECONDS )) n=$2 pids=(); shift 2
  [ $lim -gt 60 ] || { echo "== skipped (no time): $*" >> /tmp/sum/99-skipped.txt; return; }
  for spec in "$@"; do set -- $spec; r $1 $2 $lim -n $n & pids+=($!); done
  wait "${pids[@]}"
}
batch 240 4 "th022 /tmp/th-0.2.2" "th023 /tmp/th-0.2.3" "th024 /tmp/th-0.2.4"
batch 400 4 "th025 /tmp/th-0.2.5" "th026 /tmp/none" "th026pre /tmp/th-0.2.6.dev20251019"
batch 565 6 "th025w /tmp/th-0.2.5.dev20250803" "th027w /tmp/th-0.2.7.dev20251214"
kill %1
cat /tmp/sum/*.txt > $OUT/summary.txt
cd /tmp/rep && tar czf $OUT/reports.tgz *.json
cd /tmp && tar czf $OUT/logs.tgz vmstat.txt *.log $(find bt-* -name "*.log")
