#!/usr/bin/env bash
# A GPU call on one H200, carried as run.sh beside it. Issue 24, where a served run's first 8 s go (its first test
# starts 8.6 s after the controller's session start, its workers reach their first collected test 7-8 s after it):
# the import times of one pytest process collecting the ce65f32 checks (-X importtime), then, under one
# `python -m teparity serve`, the ce65f32 checks at -n 12, at -n 8, at -n 12 without the host's pytest plugins that
# the gate does not use (cov, benchmark, jaxtyping, anyio, mock), the whole gate at -n 8, and the first again.
# Run from the repository root on the device with $OUT and TEPARITY_COMMIT set.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2-run/install_bundle.sh .gpu/te-2.20.2-run /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/sum /tmp/rep
xz -dc .gpu/thunder-dev.tar.xz | tar xf - -C /tmp/th
export PYTHONPATH=/tmp/th/0.2.7.dev20260201:$BASE:$PWD/src
python3 -m teparity doctor > /tmp/sum/01-doctor.txt 2>&1
CE='tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -p no:cacheprovider'
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
s=$(date +%s%N); eval python3 -X importtime -m pytest $CE --co -q -p no:xdist > /tmp/sum/02-collect.txt 2> /tmp/importtime.txt
echo "collect-only, one process: $(( ($(date +%s%N)-s)/1000000 )) ms" >> /tmp/sum/02-collect.txt
cat > /tmp/runs.sh <<RUNS
r() { local n=\$1; shift; local s=\$(date +%s%N); python3 -m pytest "\$@" --teparity-report /tmp/rep/\$n.json > /tmp/\$n.log 2>&1
  echo "== \$n rc=\$? wall=\$(( (\$(date +%s%N)-s)/1000000 )) ms \$(tail -1 /tmp/\$n.log)" > /tmp/sum/\$n.txt; }
r 03-ce-n12 $CE -n 12
r 04-ce-n8 $CE -n 8
r 05-ce-n12-noplugins $CE -n 12 -p no:cov -p no:benchmark -p no:jaxtyping -p no:anyio -p no:mock
r 06-gate-n8 $G -n 8
r 07-ce-n12 $CE -n 12
RUNS
timeout $(( ${LIMIT_S:-300} - SECONDS )) python3 -m teparity serve --workdir /tmp/serve -- bash /tmp/runs.sh > /tmp/serve.out 2>&1
cat /tmp/sum/*.txt > $OUT/summary.txt
(cd /tmp && tar czf $OUT/out.tgz sum rep importtime.txt serve.out serve/forkserver.log 0*.log 2>/dev/null)
