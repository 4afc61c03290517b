#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.9.0 bundle less thunder's wheel and TE's torch-extension source, its core
# wheel re-zipped with LZMA (.gpu/te-2.9.0-run, to fit the 64 MiB a call carries), and four thunder builds
# (.gpu/thunder-builds-c3.tar.xz: wheels' contents, one folder per build, put first on PYTHONPATH). Issue 23:
# 0.2.5.dev20250629 again after functional-thunderfx-checkpointing-backward-unbound's range moved to cover it
# (tenth session), and three weekly builds no committed run names (0.2.7.dev20251221, 0.2.7.dev20251228,
# 0.2.7.dev20260118). Each: doctor (warms its probe), then the whole gate at -n 4, the four side by side. Run from
# the repository root on the device with $OUT and TEPARITY_COMMIT set.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0-run/install_bundle.sh .gpu/te-2.9.0-run /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/rep /tmp/sum
xz -dc .gpu/thunder-builds-c3.tar.xz | tar xf - -C /tmp/th
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
BUILDS="0.2.5.dev20250629 0.2.7.dev20251221 0.2.7.dev20251228 0.2.7.dev20260118"
keep() { cat /tmp/sum/*.txt > $OUT/summary.txt; (cd /tmp && tar czf $OUT/out.tgz sum rep *.log $(find bt-* -name "*.log") 2>/dev/null); }
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
pids=()
for v in $BUILDS; do
  (PYTHONPATH=/tmp/th/$v:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor-$v.txt 2>&1) & pids+=($!)
done
wait "${pids[@]}"; keep
lim=$(( ${LIMIT_S:-560} - SECONDS ))
pids=()
for v in $BUILDS; do
  ( s=$(date +%s%N)
    timeout $lim env PYTHONPATH=/tmp/th/$v:$BASE:$PWD/src python3 -m pytest $G -n 4 --basetemp=/tmp/bt-$v --teparity-report /tmp/rep/th$v.json > /tmp/th$v.log 2>&1
    { echo "== th$v rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"
      grep -E "^teparity: (world|known)|^NearMiss|near miss|passed|failed|error" /tmp/th$v.log | tail -6; } > /tmp/sum/02-th$v.txt ) & pids+=($!)
done
wait "${pids[@]}"
keep
