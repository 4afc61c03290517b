#!/usr/bin/env bash
# A planned GPU call, not yet run (the eighth session was lent no device): on one H200 with the TE 2.9.0
# bundle, the gate on thunder 0.2.2 .. 0.2.6, a 0.2.6 pre-release and two weekly builds no earlier run named,
# two at a time at -n 6; then, one run at a time, the current thunder's gate at cf625ab's code against this
# checkout's (its defaults, side-by-side sides, -n 8). Needs, besides the bundle (.gpu/te-2.9.0, .gpu/thunder-rel,
# .gpu/thunder-dev), the wheels of 0.2.5.dev20250803 and 0.2.7.dev20251214 in .gpu/thunder-new and cf625ab's
# tree in .gpu/ab-cf625ab (`git archive cf625ab src tests conftest.py pyproject.toml | tar -x -C ...`).
# Run from the repository root on the device with $OUT and TEPARITY_COMMIT set; writes summary.txt,
# reports.tgz, logs.tgz.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
for w in .gpu/thunder-rel/*.whl .gpu/thunder-new/*.whl .gpu/thunder-dev/*.whl; do
  v=$(basename $w | cut -d- -f2)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/th-$v $w >> $OUT/install.log 2>&1
done
mkdir -p /tmp/rep /tmp/sum
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
NEW=$PWD OLD=$PWD/.gpu/ab-cf625ab DEV=/tmp/th-0.2.7.dev20260201
# r NAME THUNDER_PATH TREE LIMIT_S PYTEST_ARGS...: one gate run of TREE's tests and code, its summary to
# /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 tree=$3 lim=$4; shift 4
  local s=$(date +%s%N)
  { echo "== $n $(date +%T)"
    (cd $tree && timeout $lim env PYTHONPATH=$th:$BASE:$tree/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1)
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "teparity time|passed|failed" /tmp/$n.log | tail -2; } > /tmp/sum/$n.txt
}
probe() { (cd $2 && timeout 60 env PYTHONPATH=$DEV:$BASE:$2/src python3 -m pytest $G -p no:xdist --co > /tmp/probe-$1.log 2>&1); }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 &
nproc > /tmp/sum/0-machine.txt; nvidia-smi -L >> /tmp/sum/0-machine.txt
r th022 /tmp/th-0.2.2 $NEW 110 -n 6 & r th023 /tmp/th-0.2.3 $NEW 110 -n 6 & wait
r th024 /tmp/th-0.2.4 $NEW 110 -n 6 & r th025 /tmp/th-0.2.5 $NEW 110 -n 6 & wait
r th026 /tmp/none $NEW 110 -n 6 & r th026pre /tmp/th-0.2.6.dev20251019 $NEW 110 -n 6 & wait
r th025w /tmp/th-0.2.5.dev20250803 $NEW 110 -n 6 & r th027w /tmp/th-0.2.7.dev20251214 $NEW 110 -n 6 &
probe old $OLD & probe new $NEW & wait
# One at a time from here, each only while the call has time left.
for step in "old $OLD -n 12" "new $NEW -n 12" "sides $NEW -n 12 --teparity-sides side-by-side" "new8 $NEW -n 8" "new2 $NEW -n 12"; do
  set -- $step; n=$1 tree=$2; shift 2
  [ $SECONDS -lt 500 ] && r $n $DEV $tree 70 "$@"
done
kill %1
cat /tmp/sum/*.txt > $OUT/summary.txt
cd /tmp/rep && tar czf $OUT/reports.tgz *.json
cd /tmp && tar czf $OUT/logs.tgz vmstat.txt *.log $(find bt-* -name "*.log")
