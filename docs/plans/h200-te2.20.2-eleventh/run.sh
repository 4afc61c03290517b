#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.20.2 bundle (.gpu/te-2.20.2, thunder 0.2.6) and five thunder builds
# (.gpu/thunder-builds.tar.xz: the wheels' contents, one folder per build). Issue 24 first, on a quiet machine:
# a forked rank's first FP8 step after each fork-server stage, both under the NVML-based CUDA check
# (first_step.py); then the whole gate with the fork server preloading torch's compiler (this commit's default)
# against the same code with PYTORCH_NVML_BASED_CUDA_CHECK=0 (the probe then refuses the compiler stage, so
# the fork server imports torch and TE only: the last commit's behaviour), alternating, for the current thunder
# and thunder 0.2.6; then the bench, fresh against forked, of the checks the gate had at ce65f32. Then issue 23:
# thunder 0.2.3, 0.2.4, 0.2.5.dev20250803 and 0.2.5.dev20250817 with TE 2.20.2, which
# functional-executor-loses-te-from-te-2.10 should now cover. Run from the repository root on the device with
# $OUT and TEPARITY_COMMIT set. A call returns at most 8 files: everything goes to $OUT/out.tgz, packed again
# after each phase, with install.log and summary.txt beside it.
export PYTHONUNBUFFERED=1
HERE=docs/plans/h200-te2.20.2-eleventh
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/rep /tmp/sum /tmp/diag
xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/th
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
DEV=/tmp/th/0.2.7.dev20260201
# r NAME THUNDER_PATH LIMIT_S ENV PYTEST_ARGS...: one gate run with ENV (VAR=VALUE) added; summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 lim=$3 e=$4; shift 4
  local s=$(date +%s%N)
  { echo "== $n $(date +%T.%N | cut -c1-12) $e"
    timeout $lim env $e PYTHONPATH=$th:$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "^teparity: (world|rank env|known)|teparity time|passed|failed|error" /tmp/$n.log | tail -5; } > /tmp/sum/$n.txt
}
# keep: pack what ran so far into $OUT/out.tgz
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt; (cd /tmp && tar czf $OUT/out.tgz sum rep diag bench *.log $(find bt-* -name "*.log") 2>/dev/null); }
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
# 1. a forked rank's first FP8 step, idle machine, under the NVML check: after stage 1, then after stage 2
# (skipped on a warm machine that has run it: the first call ran it, then hung at step 2's bare `wait`)
if [ ! -e /tmp/diag/stage2.json ]; then
  PYTORCH_NVML_BASED_CUDA_CHECK=1 python3 $HERE/first_step.py 1 /tmp/diag/stage1 2> /tmp/diag/stage1.err
  PYTORCH_NVML_BASED_CUDA_CHECK=1 python3 $HERE/first_step.py 2 /tmp/diag/stage2 2> /tmp/diag/stage2.err
fi
cat /tmp/diag/stage*.json > /tmp/sum/01-first-step.txt; keep
# 2. the environment probes (each cached by its CUDA check), side by side
pids=()
for e in PYTORCH_NVML_BASED_CUDA_CHECK=0 TEPARITY_PLAIN=1; do
  (timeout 120 env $e PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m pytest $G --co -q -p no:xdist > /tmp/probe-dev-${e%%=*}.log 2>&1) & pids+=($!)
  (timeout 120 env $e PYTHONPATH=$BASE:$PWD/src python3 -m pytest $G --co -q -p no:xdist > /tmp/probe-026-${e%%=*}.log 2>&1) & pids+=($!)
done
wait "${pids[@]}"
# 3. the whole gate, -n 12: the compiler preloaded (TEPARITY_PLAIN=1 is a no-op name) against not, alternating
OLD=PYTORCH_NVML_BASED_CUDA_CHECK=0 NEW=TEPARITY_PLAIN=1
r 02-dev-new $DEV 100 $NEW -n 12; r 03-dev-old $DEV 100 $OLD -n 12; r 04-dev-new $DEV 100 $NEW -n 12; keep
r 05-026-new /tmp/none 100 $NEW -n 12; r 06-026-old /tmp/none 100 $OLD -n 12; keep
# 4. the bench of the checks the gate had at ce65f32, fresh against forked (the runs above warmed the caches
# that outlive a run, so no warm-up run)
s=$(date +%s%N)
timeout 240 env PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity bench --no-warmup --modes fresh,forked --workdir /tmp/bench \
  -- tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -n 12 -p no:cacheprovider > /tmp/bench.log 2>&1
{ echo "== 07-bench rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -14 /tmp/bench.log; } > /tmp/sum/07-bench.txt; keep
# 5. issue 23: four thunder builds with TE 2.20.2, four at a time, while the time lasts
lim=$(( 585 - SECONDS ))
if [ $lim -gt 60 ]; then
  r 08-th023 /tmp/th/0.2.3 $lim $NEW -n 4 & a=$!; r 08-th024 /tmp/th/0.2.4 $lim $NEW -n 4 & b=$!
  r 08-th025w0803 /tmp/th/0.2.5.dev20250803 $lim $NEW -n 4 & c=$!; r 08-th025w0817 /tmp/th/0.2.5.dev20250817 $lim $NEW -n 4 & d=$!
  wait $a $b $c $d
fi
kill $VM
keep
