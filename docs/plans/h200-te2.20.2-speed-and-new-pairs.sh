#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.20.2 bundle (.gpu/te-2.20.2, .gpu/thunder-dev, .gpu/thunder-rel) and
# cf625ab's tree (.gpu/ab-cf625ab): first, on a quiet machine, issue 24's measurements (the bench of the
# ce65f32 checks, fresh against forked; the whole current-thunder gate at cf625ab's code, then at this
# checkout's with serial and with side-by-side sides); then thunder 0.2.2 .. 0.2.5 and 0.2.6.dev20251019 with
# TE 2.20.2, pairs no committed run names (issue 23), three and two at a time, while thunder 0.2.6's
# environment probe warms; last, thunder 0.2.6's whole gate with its probe warm. Run from the repository
# root on the device with $OUT and TEPARITY_COMMIT set; writes summary.txt, bench.json, reports.tgz, logs.tgz.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
for w in .gpu/thunder-dev/*.whl .gpu/thunder-rel/*.whl; do
  v=$(basename $w | cut -d- -f2)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/th-$v $w >> $OUT/install.log 2>&1
done
mkdir -p /tmp/rep /tmp/sum
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
NEW=$PWD OLD=$PWD/.gpu/ab-cf625ab DEV=/tmp/th-0.2.7.dev20260201
# r NAME THUNDER_PATH TREE LIMIT_S PYTEST_ARGS...: one gate run of TREE's tests and code; summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 tree=$3 lim=$4; shift 4
  local s=$(date +%s%N)
  { echo "== $n $(date +%T)"
    (cd $tree && timeout $lim env PYTHONPATH=$th:$BASE:$tree/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1)
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "teparity time|passed|failed" /tmp/$n.log | tail -2; } > /tmp/sum/$n.txt
}
vmstat -t 1 > /tmp/vmstat.txt 2>&1 &
{ nproc; nvidia-smi -L; } > /tmp/sum/00-machine.txt
s=$(date +%s%N)
timeout 300 env PYTHONPATH=$DEV:$BASE:$NEW/src python3 -m teparity bench --modes fresh,forked --workdir /tmp/bench -- tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -n 12 -p no:cacheprovider > /tmp/bench.log 2>&1
{ echo "== bench rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -12 /tmp/bench.log; } > /tmp/sum/01-bench.txt
r 02-old $DEV $OLD 90 -n 12
r 03-new $DEV $NEW 90 -n 12
r 04-sides $DEV $NEW 90 -n 12 --teparity-sides side-by-side
# at most 570 s in all: each later step starts only while its limit fits
(timeout 90 env PYTHONPATH=$BASE:$NEW/src python3 -m pytest $G --co -p no:xdist > /tmp/probe026.log 2>&1) &
lim=$(( 440 - SECONDS ))
if [ $lim -gt 60 ]; then
  r 05-th022 /tmp/th-0.2.2 $NEW $lim -n 4 & a=$!; r 05-th023 /tmp/th-0.2.3 $NEW $lim -n 4 & b=$!
  r 05-th024 /tmp/th-0.2.4 $NEW $lim -n 4 & c=$!; wait $a $b $c
fi
lim=$(( 550 - SECONDS ))
if [ $lim -gt 60 ]; then
  r 06-th025 /tmp/th-0.2.5 $NEW $lim -n 6 & a=$!; r 06-th026pre /tmp/th-0.2.6.dev20251019 $NEW $lim -n 6 & b=$!; wait $a $b
fi
lim=$(( 565 - SECONDS ))
[ $lim -gt 35 ] && r 07-th026 /tmp/none $NEW $lim -n 12
kill %1
cat /tmp/sum/*.txt > $OUT/summary.txt
cp /tmp/bench/bench.json $OUT/
cd /tmp/rep && tar czf $OUT/reports.tgz *.json
cd /tmp && tar czf $OUT/logs.tgz vmstat.txt *.log bench/*.log $(find bt-* -name "*.log")
