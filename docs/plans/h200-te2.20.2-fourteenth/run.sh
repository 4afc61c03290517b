#!/usr/bin/env bash
# A GPU call on one H200 (issue 24) at the standby ranks' commit, everything at -n 8 with 2 gloo ranks sharing the GPU:
# the environment probes warmed by `doctor`; then thunder 0.2.6's whole gate in four benches on this machine, A B A B:
# served with 16 standby ranks (forked ahead, each having imported thunder, initialised CUDA and run TE's first FP8
# steps) after an untimed warm-up, and forked (the run's own fork server) in the same bench; served with none; with 16
# again; with none again. Then the current thunder's whole gate served with 16, after its own warm-up. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set; everything goes to $OUT/out.tgz, packed after each
# bench (a call returns at most 8 files).
source docs/plans/h200-te2.20.2-fourteenth/common.sh
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt
  (cd /tmp && tar czf $OUT/out.tgz sum vmstat.txt $(find bench-* -maxdepth 1 -name "*.json" -o -maxdepth 1 -name "*.log") \
     $(find bench-* -path "*forkserver*" -name "*.log") $(find bench-*/served -name "rank*.log" 2>/dev/null) 2>/dev/null); }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-dev.txt 2>&1 & a=$!
PYTHONPATH=$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-026.txt 2>&1 & b=$!
wait $a $b
keep
# b NAME THUNDER_PATH LIMIT_S BENCH_ARGS... -- PYTEST_ARGS: one bench; its last lines in /tmp/sum/NAME.txt
b() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  timeout $lim env PYTHONPATH=$th$BASE:$PWD/src python3 -m teparity bench --workdir /tmp/bench-$n "$@" > /tmp/bench-$n.out 2>&1
  { echo "== $n rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -8 /tmp/bench-$n.out; } > /tmp/sum/$n.txt; keep
}
b 02-026-standby16 "" 200 --modes forked,served --standby-ranks 16 -- $G -n 8
b 03-026-standby0 "" 80 --modes served --standby-ranks 0 --no-warmup -- $G -n 8
b 04-026-standby16 "" 80 --modes served --standby-ranks 16 --no-warmup -- $G -n 8
b 05-026-standby0 "" 80 --modes served --standby-ranks 0 --no-warmup -- $G -n 8
b 06-dev-standby16 "$DEV:" $(( ${LIMIT_S:-585} - SECONDS )) --modes served --standby-ranks 16 -- $G -n 8
kill $VM
keep
