#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.20.2 bundle less thunder's wheel and TE's torch-extension source (which a
# prebuilt extension makes unused) and with its core wheel re-zipped with LZMA (the same files), .gpu/te-2.20.2-run,
# so that the call fits the 64 MiB it carries, and thunder
# 0.2.6 and the current build 0.2.7.dev20260201 as the contents of their PyPI wheels (.gpu/thunder-dev.tar.xz, one
# folder per build, put first on PYTHONPATH; install.log's last line then says the bundle has no thunder). Issue 24: the
# environment probes warmed by `doctor`; then three benches, each in one run on this machine: the checks the gate
# had at ce65f32 fresh, forked (the run's own fork server) and served (a fork server the bench started before its
# runs, as `teparity serve` and `repeat` give theirs), after an untimed served warm-up; the whole gate forked
# against served, for the current thunder and for 0.2.6. Run from the repository root on the device with $OUT and
# TEPARITY_COMMIT set. A call returns at most 8 files: everything goes to $OUT/out.tgz, packed after each phase.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2-run/install_bundle.sh .gpu/te-2.20.2-run /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/sum
xz -dc .gpu/thunder-dev.tar.xz | tar xf - -C /tmp/th
DEV=/tmp/th/0.2.7.dev20260201
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt
  (cd /tmp && tar czf $OUT/out.tgz sum vmstat.txt $(find bench-* -maxdepth 1 -name "*.json" -o -maxdepth 1 -name "*.log") \
     $(find bench-* -path "*forkserver*" -name "*.log") $(find bench-* -name "rank*.log") 2>/dev/null); }
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
# 1. the probes, one per environment, side by side (doctor probes as the gate does and fills its cache)
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-dev.txt 2>&1 & a=$!
PYTHONPATH=/tmp/th/0.2.6:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-026.txt 2>&1 & b=$!
wait $a $b; keep
# b NAME THUNDER_PATH LIMIT_S BENCH_ARGS... -- PYTEST_ARGS: one bench; its last lines in /tmp/sum/NAME.txt
b() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m teparity bench --workdir /tmp/bench-$n "$@" > /tmp/bench-$n.out 2>&1
  { echo "== $n rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -8 /tmp/bench-$n.out; } > /tmp/sum/$n.txt; keep
}
# 2. the checks of ce65f32: fresh, forked, served (untimed served warm-up first)
b 02-ce65f32 $DEV 240 --modes fresh,forked,served -- tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -n 12 -p no:cacheprovider
# 3. the whole gate, current thunder, then 0.2.6: forked against served (the runs above warmed the caches)
b 03-gate-dev $DEV 130 --modes forked,served --no-warmup -- $G -n 12
b 04-gate-026 /tmp/th/0.2.6 140 --modes forked,served --no-warmup -- $G -n 12
kill $VM
keep
