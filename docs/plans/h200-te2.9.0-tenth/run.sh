#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.9.0 bundle (.gpu/te-2.9.0) and the thunder builds
# (.gpu/thunder-builds.tar.xz: the wheels' contents, one folder per build; a wheel is about 1 MB and 41 of them
# do not fit beside the bundle in a call's 64 MiB, their contents do in 1 MB). Issue 23: first thunder 0.2.2,
# 0.2.3, 0.2.4, 0.2.5, 0.2.6 and the pre-release 0.2.6.dev20251019 with TE 2.9.0, three at a time, each of
# which must exit 0 at this commit; then the registry entries' bisects side by side, each judged by its entry
# alone (bisect --entry): the lower bounds of legacy-executor-miscounts-te-2.9-saved-tensors,
# functional-fp8-group-ignored and functional-checkpointing-updates-fp8-state-twice, the fixes of
# functional-checkpointing-saves-te-linears and functional-thunderfx-checkpointing-backward-unbound, and the fix
# of functional-amax-not-reduced-across-ranks between the builds the ninth session left. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set. A call returns at most 8 files, so everything
# goes to $OUT/out.tgz (packed again after each phase, so that a cut-off call still returns what ran), with
# install.log and summary.txt beside it.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/wheels /tmp/rep /tmp/sum /tmp/bis
xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/th
for d in /tmp/th/*/; do v=$(basename $d)
  (cd $d && python3 -m zipfile -c /tmp/wheels/lightning_thunder-$v-py3-none-any.whl thunder lightning_thunder-$v.dist-info) &
done
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
# r NAME THUNDER_PATH LIMIT_S PYTEST_ARGS...: one gate run; summary in /tmp/sum/NAME.txt
r() {
  local n=$1 th=$2 lim=$3; shift 3
  local s=$(date +%s%N)
  { echo "== $n $(date +%T)"
    timeout $lim env PYTHONPATH=$th:$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-$n --teparity-report /tmp/rep/$n.json "$@" > /tmp/$n.log 2>&1
    echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
    grep -E "^teparity: (world|known)|teparity time|passed|failed|error" /tmp/$n.log | tail -4; } > /tmp/sum/$n.txt
}
# keep: pack what ran so far into $OUT/out.tgz
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt; (cd /tmp && tar czf $OUT/out.tgz sum rep bis *.log 2>/dev/null); }
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
vmstat -t 1 > /tmp/vmstat.txt 2>&1 & VM=$!
r 01-th022 /tmp/th/0.2.2 200 -n 5 & a=$!; r 01-th023 /tmp/th/0.2.3 200 -n 5 & b=$!; r 01-th024 /tmp/th/0.2.4 200 -n 5 & c=$!
wait $a $b $c; keep
r 02-th025 /tmp/th/0.2.5 200 -n 5 & a=$!; r 02-th026 /tmp/none 200 -n 5 & b=$!; r 02-th026pre /tmp/th/0.2.6.dev20251019 200 -n 5 & c=$!
wait $a $b $c; keep
N=tests/numerics/test_numerics_parity.py F=tests/features/test_feature_parity.py P=tests/ddp/test_ddp_parity.py
# b NAME ENTRY GOOD BAD NODEID: one bisect, its log in /tmp/bis/NAME
b() {
  local lim=$(( 585 - SECONDS ))
  timeout $lim env PYTHONPATH=$BASE:$PWD/src python3 -m teparity bisect --entry $2 --wheels /tmp/wheels --good $3 --bad $4 \
    --workdir /tmp/bis/$1 -- "$5" -p no:xdist -p no:cacheprovider > /tmp/bis/$1.out 2>&1
  echo "rc=$?" >> /tmp/bis/$1.out
}
pids=()
b miscount-from legacy-executor-miscounts-te-2.9-saved-tensors 0.2.1 0.2.2 "$N::test_thunder_matches_eager_te[legacy-delayed]" & pids+=($!)
b group-from functional-fp8-group-ignored 0.2.4 0.2.5 "$P::test_amax_reduction_stays_in_the_fp8_group[functional-per-rank]" & pids+=($!)
b twice-from functional-checkpointing-updates-fp8-state-twice 0.2.4 0.2.5.dev20250803 "$F::test_activation_checkpointing_matches_eager_te[functional-jit-delayed]" & pids+=($!)
b ckpt-saves-fix functional-checkpointing-saves-te-linears 0.2.5 0.2.4 "$F::test_activation_checkpointing_matches_eager_te[functional-jit-delayed]" & pids+=($!)
b thunderfx-fix functional-thunderfx-checkpointing-backward-unbound 0.2.5 0.2.4 "$F::test_activation_checkpointing_matches_eager_te[functional-thunderfx-delayed]" & pids+=($!)
b unreduced-fix functional-amax-not-reduced-across-ranks 0.2.5.dev20250824 0.2.5.dev20250810 "$P::test_first_ddp_step_matches_torch_ddp[functional]" & pids+=($!)
wait "${pids[@]}"
kill $VM
keep
for f in /tmp/bis/*.out; do echo "== $(basename $f .out)"; tail -25 $f; done >> $OUT/summary.txt
