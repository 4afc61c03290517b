#!/usr/bin/env bash
# A GPU call on one H200 with the TE 2.20.2 bundle and the current thunder build, carried as for run.sh beside it. Issue 24:
# `python -m teparity repeat N` of the whole current-thunder gate at -n 12, its runs forking from the one fork
# server the repeat starts. REPEAT_N (default 20) runs, cut off at LIMIT_S (default 585) from the call's start:
# repeat.json is written after every run. Run from the repository root on the device with $OUT and TEPARITY_COMMIT set.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2-run/install_bundle.sh .gpu/te-2.20.2-run /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/sum
[ -d /tmp/th/0.2.7.dev20260201 ] || xz -dc .gpu/thunder-dev.tar.xz | tar xf - -C /tmp/th
DEV=/tmp/th/0.2.7.dev20260201
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
{ nproc; nvidia-smi -L; date +%T; } > /tmp/sum/00-machine.txt
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor.txt 2>&1
s=$(date +%s%N)
timeout $(( ${LIMIT_S:-585} - SECONDS )) env PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity repeat ${REPEAT_N:-20} --workdir /tmp/repeat -- $G -n 12 > /tmp/repeat.out 2>&1
{ echo "== repeat rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -25 /tmp/repeat.out; } > /tmp/sum/02-repeat.txt
cat /tmp/sum/*.txt > $OUT/summary.txt
(cd /tmp && tar czf $OUT/out.tgz sum repeat.out repeat/repeat.json repeat/*.json repeat/*.log repeat/forkserver 2>/dev/null)
