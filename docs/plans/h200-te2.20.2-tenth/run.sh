#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.20.2 bundle (.gpu/te-2.20.2), the thunder builds (.gpu/thunder-builds.tar.xz:
# the wheels' contents, one folder per build) and the last commit's tree (.gpu/ab-base). Issue 24 first, on a
# quiet machine: where a forked rank's first FP8 step goes after each fork-server stage (first_step.py, the TE
# import under -X importtime); the whole current-thunder gate at the last commit and at this tree (which adds
# torch's compiler to the fork server), then this tree again with every side under cProfile
# (profile_summary.py); thunder 0.2.6's whole gate at both. Then issue 23: thunder 0.2.2, 0.2.3, 0.2.4 and two
# weekly builds with TE 2.20.2, pairs no committed run names. Run from the repository root on the device with
# $OUT and TEPARITY_COMMIT set; writes summary.txt and *.tgz under $OUT.
export PYTHONUNBUFFERED=1
HERE=docs/plans/h200-te2.20.2-tenth
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/rep /tmp/sum /tmp/diag /tmp/prof
xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/th
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
NEW=$PWD OLD=$PWD/.gpu/ab-base DEV=/tmp/th/0.2.7.dev20260201
# r NAME THUNDER_PATH TREE LIMIT_S PYTEST_ARGS...: one gate run of TREE's tests and code; summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 tree=$3 lim=$4; shift 4
  local s=$(date +%s%N)
  { echo "== $n $(date +%T.%N | cut -c1-12)"
    (cd $tree && timeout $lim env PYTHONPATH=$th:$BASE:$tree/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1)
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "^teparity: world|teparity time|passed|failed" /tmp/$n.log | tail -3; } > /tmp/sum/$n.txt
  cp /tmp/sum/$n.txt /tmp/$n.log $OUT/ 2>/dev/null
}
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
# 1. a forked rank's first FP8 step, idle machine: after stage 1 (under -X importtime), then after stage 2
python3 -X importtime $HERE/first_step.py 1 /tmp/diag/stage1 2> /tmp/diag/importtime-stage1.txt
python3 $HERE/first_step.py 2 /tmp/diag/stage2 2> /tmp/diag/stage2.err
cat /tmp/diag/stage*.json > /tmp/sum/01-first-step.txt; cp /tmp/diag/* $OUT/ 2>/dev/null
# 2. the environment probes of both trees and of thunder 0.2.6, side by side (each caches by its code)
(cd $OLD && timeout 120 env PYTHONPATH=$DEV:$BASE:$OLD/src python3 -m pytest $G --co -p no:xdist > /tmp/probe-old.log 2>&1) & a=$!
(timeout 120 env PYTHONPATH=$DEV:$BASE:$NEW/src python3 -m pytest $G --co -p no:xdist > /tmp/probe-new.log 2>&1) & b=$!
(timeout 120 env PYTHONPATH=$BASE:$NEW/src python3 -m pytest $G --co -p no:xdist > /tmp/probe-026.log 2>&1) & c=$!
(cd $OLD && timeout 120 env PYTHONPATH=$BASE:$OLD/src python3 -m pytest $G --co -p no:xdist > /tmp/probe-026old.log 2>&1) & d=$!
wait $a $b $c $d
# 3. the whole current-thunder gate: last commit, this tree, this tree profiled; thunder 0.2.6 at both
r 02-dev-old $DEV $OLD 100 -n 12
r 03-dev-new $DEV $NEW 100 -n 12
r 04-026-old /tmp/none $OLD 100 -n 12
r 05-026-new /tmp/none $NEW 100 -n 12
r 06-dev-new-again $DEV $NEW 100 -n 12
export TEPARITY_PROFILE_DIR=/tmp/prof; r 07-dev-new-profiled $DEV $NEW 120 -n 12; unset TEPARITY_PROFILE_DIR
python3 $HERE/profile_summary.py /tmp/prof > $OUT/profile-summary.txt 2>&1
# 4. issue 23: pairs no committed run names, while the time lasts (at most 575 s in all)
lim=$(( 500 - SECONDS ))
if [ $lim -gt 90 ]; then
  r 08-th022 /tmp/th/0.2.2 $NEW $lim -n 4 & a=$!; r 08-th023 /tmp/th/0.2.3 $NEW $lim -n 4 & b=$!
  r 08-th024 /tmp/th/0.2.4 $NEW $lim -n 4 & c=$!; wait $a $b $c
fi
lim=$(( 570 - SECONDS ))
if [ $lim -gt 70 ]; then
  r 09-th025w /tmp/th/0.2.5.dev20250803 $NEW $lim -n 6 & a=$!; r 09-th027w /tmp/th/0.2.7.dev20251214 $NEW $lim -n 6 & b=$!; wait $a $b
fi
kill $VM
cat /tmp/sum/*.txt > $OUT/summary.txt
cd /tmp/rep && tar czf $OUT/reports.tgz *.json
cd /tmp && tar czf $OUT/logs.tgz vmstat.txt *.log $(find bt-* -name "*.log")
