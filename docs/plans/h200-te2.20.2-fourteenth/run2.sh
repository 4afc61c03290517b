#!/usr/bin/env bash
# The second GPU call on one H200 (issue 24), at the code with shared-run units in the schedule and gc.freeze at exit:
# the CPU sat 25-45% idle in call1's served runs at -n 8, so thunder 0.2.6's whole gate served (32 standby ranks) at
# -n 12 (after an untimed warm-up), -n 8, -n 16 and -n 12 again; then the current thunder's whole gate and the checks the
# gate had at ce65f32, served at -n 12. Run from the repository root on the device with $OUT and TEPARITY_COMMIT set;
# everything goes to $OUT/out.tgz, packed after each bench.
source docs/plans/h200-te2.20.2-fourteenth/common.sh
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt
  (cd /tmp && tar czf $OUT/out.tgz sum vmstat.txt $(find bench-* -maxdepth 1 -name "*.json" -o -maxdepth 1 -name "*.log") \
     $(find bench-* -path "*forkserver*" -name "*.log") $(find bench-*/served -name "rank*.log" 2>/dev/null) 2>/dev/null); }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-dev.txt 2>&1 & a=$!
PYTHONPATH=$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-026.txt 2>&1 & b=$!
wait $a $b
keep
b() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  timeout $lim env PYTHONPATH=$th$BASE:$PWD/src python3 -m teparity bench --workdir /tmp/bench-$n "$@" > /tmp/bench-$n.out 2>&1
  { echo "== $n rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -6 /tmp/bench-$n.out; } > /tmp/sum/$n.txt; keep
}
CE='tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -p no:cacheprovider'
b 02-026-n12 "" 130 --modes served --standby-ranks 32 -- $G -n 12
b 03-026-n8 "" 75 --modes served --standby-ranks 32 --no-warmup -- $G -n 8
b 04-026-n16 "" 75 --modes served --standby-ranks 32 --no-warmup -- $G -n 16
b 05-026-n12 "" 75 --modes served --standby-ranks 32 --no-warmup -- $G -n 12
b 06-dev-n12 "$DEV:" 110 --modes served --standby-ranks 32 -- $G -n 12
eval b 07-ce-n12 "$DEV:" $(( ${LIMIT_S:-585} - SECONDS )) --modes served --standby-ranks 32 --no-warmup -- $CE -n 12
kill $VM
keep
