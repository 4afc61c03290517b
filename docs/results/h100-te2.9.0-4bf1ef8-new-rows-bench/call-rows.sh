#!/usr/bin/env bash
# The new rows on TE 2.9.0's declared thunder builds and the new entries' reproductions, then the gate's bench on
# thunder 0.2.7.dev20260201 (served, stored, reused) alone on the host.
set -u
TE=$1; K=$2
export PYTHONUNBUFFERED=1; start=$(date +%s)
W=/tmp/callrows-$TE; rm -rf $W; mkdir -p $W/repro
( OUT=$W timeout 330 bash scripts/gpu-matrix.sh $TE .gpu/te-$TE .gpu/thunder-builds.tar.xz --timeout-s 300 -- -n 2 -p no:cacheprovider -k "$K"
  echo "rows exit $? at $(( $(date +%s) - start )) s" >> $W/call.log ) &
sleep 50
SITE=/tmp/te-site-$TE; B=/tmp/thunder-builds-$TE
for v in 0.2.6 0.2.7.dev20260201; do
  for id in fp8-state-per-input-requires-grad te-recipe-type-change-strands-delayed-state te-modules-untraceable-under-thunder-jit; do
    ( PYTHONPATH=$B/$v:$PWD/src:$SITE python3 -m teparity repro $id --out $W/repro/$id-$v.py >/dev/null 2>&1
      PYTHONPATH=$B/$v:$SITE timeout 200 python3 $W/repro/$id-$v.py > $W/repro/$id-$v.log 2>&1; echo "exit $?" >> $W/repro/$id-$v.log ) &
  done
done
( PYTHONPATH=$B/0.2.6:$PWD/src:$SITE timeout 240 python3 -m pytest -p no:cacheprovider -q harness/test_gpu_kills.py \
    -k "thunderfx_jits or te_module_networks" > $W/kills.log 2>&1; echo "kills exit $?" >> $W/kills.log ) &
wait
echo "rows and repros done at $(( $(date +%s) - start )) s" >> $W/call.log
PYTHONPATH=$B/0.2.7.dev20260201:$PWD/src:$SITE timeout $(( 560 - ($(date +%s) - start) )) python3 -m teparity bench --workdir $W/bench \
  --modes served,stored,reused -- tests -n 16 > $W/bench.out 2>&1
echo "bench exit $? at $(( $(date +%s) - start )) s" >> $W/call.log
cp $W/call.log $OUT/ 2>/dev/null
(cd $W && tar czf $OUT/callrows-$TE.tgz --exclude='*.pt' .)
