#!/usr/bin/env bash
# A GPU call on one H200 (issue 24) at the final code, everything at -n 8: the environment probes warmed by `doctor`;
# one lone pytest collecting the ce65f32 checks (collection imports no torch since 9e77aa3); then three benches,
# each in one run on this machine: the checks the gate had at ce65f32 fresh, forked (the run's own fork server) and
# served (a fork server the bench started before its runs), after an untimed served warm-up; the whole gate forked
# against served, for the current thunder and for 0.2.6. Every parity report now has the run's phases. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set; everything goes to $OUT/out.tgz, packed after each
# phase (a call returns at most 8 files).
source docs/plans/h200-te2.20.2-thirteenth/common.sh
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt
  (cd /tmp && tar czf $OUT/out.tgz sum vmstat.txt collect.log $(find bench-* -maxdepth 1 -name "*.json" -o -maxdepth 1 -name "*.log") \
     $(find bench-* -path "*forkserver*" -name "*.log") 2>/dev/null); }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-dev.txt 2>&1 & a=$!
PYTHONPATH=/tmp/th/0.2.6:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-026.txt 2>&1 & b=$!
wait $a $b
s=$(date +%s%N); eval PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m pytest $CE --co -q -p no:xdist > /tmp/collect.log 2>&1
echo "== collect-only, one process, rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms $(tail -1 /tmp/collect.log)" > /tmp/sum/01-collect.txt
keep
# b NAME THUNDER_PATH LIMIT_S BENCH_ARGS... -- PYTEST_ARGS: one bench; its last lines in /tmp/sum/NAME.txt
b() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m teparity bench --workdir /tmp/bench-$n "$@" > /tmp/bench-$n.out 2>&1
  { echo "== $n rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -8 /tmp/bench-$n.out; } > /tmp/sum/$n.txt; keep
}
b 02-ce65f32 $DEV 270 --modes fresh,forked,served -- tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -n 8 -p no:cacheprovider
b 03-gate-dev $DEV 120 --modes forked,served --no-warmup -- $G -n 8
b 04-gate-026 /tmp/th/0.2.6 $(( ${LIMIT_S:-585} - SECONDS )) --modes forked,served --no-warmup -- $G -n 8
kill $VM
keep
