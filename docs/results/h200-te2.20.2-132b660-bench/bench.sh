#!/usr/bin/env bash
# On thunder 0.2.7.dev20260201 + TE 2.20.2, one H200, at teparity 132b660: bench of the whole gate at -n 8, forked (a
# fork server per run) and served (one fork server for both runs), nothing else running. Run from the repository root
# on the GPU host, with $OUT a writable folder and the TE 2.20.2 bundle at .gpu/te-2.20.2.
export TEPARITY_COMMIT=132b660 PYTHONUNBUFFERED=1
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 > $OUT/bench-install.log 2>&1
export PYTHONPATH=$PYTHONPATH:src
s=$(date +%s)
timeout 200 python3 -m teparity bench --modes forked,served --workdir /tmp/bench -- -n 8 -p no:cacheprovider > $OUT/bench.txt 2>&1
echo "bench exit $? in $(( $(date +%s)-s )) s" >> $OUT/bench.txt
cp /tmp/bench/bench.json $OUT/ 2>/dev/null
