#!/usr/bin/env bash
# A GPU run on one H200 (issue 24), everything at -n 8 with 2 gloo ranks sharing the GPU and
# the served fork server keeping 32 standby ranks: thunder 0.2.6's whole gate forked and served in one bench (forked
# first, which fills the caches that outlive a run); a repeat of 0.2.6's whole gate on one served fork server, run
# after run (its standby ranks warming again while the next run starts); the checks the gate had at ce65f32 fresh,
# forked and served in one bench; the current thunder's whole gate served, up to the call's limit. Run from the repository root on the device
# with $OUT and TEPARITY_COMMIT set; everything goes to $OUT/out.tgz, packed after each step.
source docs/results/h200-te2.20.2-ff8476f-bench/common.sh   # the copy beside this script
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt
  (cd /tmp && tar czf $OUT/out.tgz sum vmstat.txt $(find bench-* repeat-026 -maxdepth 1 -name "*.json" -o -maxdepth 1 -name "*.log" 2>/dev/null) \
     $(find bench-* repeat-026 -path "*forkserver*" -name "*.log" 2>/dev/null) 2>/dev/null); }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-dev.txt 2>&1 & a=$!
PYTHONPATH=$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-026.txt 2>&1 & b=$!
wait $a $b
keep
b() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  timeout $lim env PYTHONPATH=$th$BASE:$PWD/src python3 -m teparity bench --workdir /tmp/bench-$n "$@" > /tmp/bench-$n.out 2>&1
  { echo "== $n rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -8 /tmp/bench-$n.out; } > /tmp/sum/$n.txt; keep
}
CE='tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -p no:cacheprovider'
b 02-gate-026 "" 115 --modes forked,served --standby-ranks 32 --no-warmup -- $G -n 8
s=$(date +%s%N)
timeout 125 env PYTHONPATH=$BASE:$PWD/src python3 -m teparity repeat 3 --workdir /tmp/repeat-026 --standby-ranks 32 --deadline-s 118 -- $G -n 8 > /tmp/repeat-026.out 2>&1
{ echo "== 03-repeat-026 rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -9 /tmp/repeat-026.out; } > /tmp/sum/03-repeat-026.txt; keep
eval b 04-ce "$DEV:" 175 --modes fresh,forked,served --standby-ranks 32 --no-warmup -- $CE -n 8
b 05-gate-dev "$DEV:" $(( ${LIMIT_S:-585} - SECONDS )) --modes served --standby-ranks 32 --no-warmup -- $G -n 8
kill $VM
keep
