#!/usr/bin/env bash
# The new rows on one TE release's declared thunder builds, the new entries' reproductions on two builds, mutations.
set -u
TE=$1; K=$2
export PYTHONUNBUFFERED=1; start=$(date +%s)
W=/tmp/callx-$TE; rm -rf $W; mkdir -p $W/repro $W/kill
( OUT=$W timeout 420 bash scripts/gpu-matrix.sh $TE .gpu/te-$TE .gpu/thunder-builds.tar.xz --timeout-s 400 -- -n 2 -p no:cacheprovider -k "$K"
  echo "rows exit $? at $(( $(date +%s) - start )) s" >> $W/call.log ) &
sleep 60   # the TE site and the thunder builds unpacked by gpu-matrix.sh
SITE=/tmp/te-site-$TE; B=/tmp/thunder-builds-$TE
for v in 0.2.4 0.2.6 0.2.7.dev20260201; do
  for id in functional-runs-fp8-where-autocast-disabled legacy-runs-fp8-inside-disabled-autocast cuda-graph-transform-asserts-a-backward-layout te-default-recipe-asserts-under-thunder-jit functional-new-recipe-object-resets-fp8-state; do
    ( PYTHONPATH=$B/$v:$PWD/src:$SITE python3 -m teparity repro $id --out $W/repro/$id-$v.py >/dev/null 2>&1
      PYTHONPATH=$B/$v:$SITE timeout 200 python3 $W/repro/$id-$v.py > $W/repro/$id-$v.log 2>&1; echo "exit $?" >> $W/repro/$id-$v.log ) &
  done
done
wait
for m in functional-scale-perturbed legacy-scale-perturbed recipe-change-state-of-another-history; do
  PYTHONPATH=$B/0.2.6:$PWD/src:$SITE timeout 120 python3 -m pytest -n 4 -p no:cacheprovider tests/features tests/ddp -k "$K" \
    --teparity-inject=$m --teparity-report=$W/kill/$m.json > $W/kill/$m.log 2>&1
  echo "kill $m exit $? at $(( $(date +%s) - start )) s" >> $W/call.log
done
cp $W/call.log $W/matrix.txt $OUT/ 2>/dev/null
(cd $W && tar czf $OUT/callx-$TE.tgz .)
