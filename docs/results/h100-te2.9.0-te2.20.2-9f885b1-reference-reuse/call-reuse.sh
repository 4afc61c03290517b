#!/usr/bin/env bash
# One TE release's declared stacks at this commit, and the FP8-switching entries' reproductions on two builds.
set -u
TE=$1; shift
export PYTHONUNBUFFERED=1; start=$(date +%s)
W=/tmp/callr-$TE; rm -rf $W; mkdir -p $W/repro
( OUT=$W timeout 540 bash scripts/gpu-matrix.sh $TE .gpu/te-$TE .gpu/thunder-builds.tar.xz --timeout-s 500 "$@" -- -n 2 -p no:cacheprovider --teparity-reference-store /tmp/refs-$TE
  echo "matrix exit $? at $(( $(date +%s) - start )) s" >> $W/call.log ) &
sleep 45
SITE=/tmp/te-site-$TE; B=/tmp/thunder-builds-$TE
for v in 0.2.6 0.2.7.dev20260201; do
  for id in functional-runs-fp8-where-autocast-disabled legacy-runs-fp8-inside-disabled-autocast te-default-recipe-asserts-under-thunder-jit cuda-graph-transform-asserts-a-backward-layout; do
    ( PYTHONPATH=$B/$v:$PWD/src:$SITE python3 -m teparity repro $id --out $W/repro/$id-$v.py >/dev/null 2>&1
      PYTHONPATH=$B/$v:$SITE timeout 200 python3 $W/repro/$id-$v.py > $W/repro/$id-$v.log 2>&1; echo "exit $?" >> $W/repro/$id-$v.log ) &
  done
done
wait
cp $W/call.log $W/matrix.txt $OUT/ 2>/dev/null
ls -la /tmp/refs-$TE | wc -l > $W/refs.txt
(cd $W && tar czf $OUT/callr-$TE.tgz .)
