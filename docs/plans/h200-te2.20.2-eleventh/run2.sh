#!/usr/bin/env bash
# The eleventh session's last GPU call on one H200 (TE 2.20.2 bundle, the thunder builds' wheel contents): issue
# 23's re-runs that run.sh's call cut off at 110 s (63-68 of 84 tests done, none failed): thunder 0.2.3, 0.2.4,
# 0.2.5.dev20250803 and 0.2.5.dev20250817 with TE 2.20.2, four at a time at -n 4, which
# functional-executor-loses-te-from-te-2.10 should now cover. Run from the repository root on the device with
# $OUT and TEPARITY_COMMIT set; everything goes to $OUT/out.tgz, with install.log and summary.txt beside it.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/rep /tmp/sum
xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/th
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
# r NAME THUNDER_PATH LIMIT_S PYTEST_ARGS...: one gate run; summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  { echo "== $n $(date +%T.%N | cut -c1-12)"
    timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "^teparity: (world|known)|teparity time|passed|failed|error" /tmp/$n.log | tail -4; } > /tmp/sum/$n.txt
}
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
lim=$(( ${LIMIT_S:-300} - SECONDS ))
r 09-th023 /tmp/th/0.2.3 $lim -n 4 & a=$!; r 09-th024 /tmp/th/0.2.4 $lim -n 4 & b=$!
r 09-th025w0803 /tmp/th/0.2.5.dev20250803 $lim -n 4 & c=$!; r 09-th025w0817 /tmp/th/0.2.5.dev20250817 $lim -n 4 & d=$!
wait $a $b $c $d
cat /tmp/sum/*.txt > $OUT/summary.txt
(cd /tmp && tar czf $OUT/out.tgz sum rep *.log $(find bt-* -name "*.log"))
