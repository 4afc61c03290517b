#!/usr/bin/env bash
# A planned GPU call on one H200 with TE 2.9.0: four bisects side by side, each judged by one registry entry
# alone (`--entry`), of a bound set by where earlier runs stopped (the ninth session ran two others, and the
# fix of functional-amax-not-reduced-across-ranks from 0.2.5.dev20250803). A call carries at most 64 MiB and
# a later call on a warm machine finds no ignored path it did not carry (seen: the bundle was gone), so
# .gpu/te-2.9.0 travels with the wheels each time, and about 10 wheels (0.9 MB each) fit beside it and the tree.
# miscount-from needs the 10 of 0.2.1 .. 0.2.2; the other three the 13 of 0.2.4 .. 0.2.5, which do not fit: run
# them on halves of that span, or with a smaller bundle. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set; writes summary.txt and bisects.tgz.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site-bisect > $OUT/install.log 2>&1
rm -rf /tmp/bis; mkdir -p /tmp/bis
N=tests/numerics/test_numerics_parity.py F=tests/features/test_feature_parity.py P=tests/ddp/test_ddp_parity.py
# b NAME ENTRY GOOD BAD NODEID: one bisect, its log in /tmp/bis/NAME
b() {
  timeout 540 env PYTHONPATH=$PYTHONPATH:$PWD/src python3 -m teparity bisect --entry $2 --wheels .gpu/bisect --good $3 --bad $4 \
    --workdir /tmp/bis/$1 -- "$5" -p no:xdist -p no:cacheprovider > /tmp/bis/$1.out 2>&1
  echo "rc=$?" >> /tmp/bis/$1.out
}
vmstat -t 1 > /tmp/bis/vmstat.txt 2>&1 &
pids=()
b miscount-from legacy-executor-miscounts-te-2.9-saved-tensors 0.2.1 0.2.2 "$N::test_thunder_matches_eager_te[legacy-delayed]" & pids+=($!)
b group-from functional-fp8-group-ignored 0.2.4 0.2.5 "$P::test_amax_reduction_stays_in_the_fp8_group[functional-per-rank]" & pids+=($!)
b ckpt-saves-fix functional-checkpointing-saves-te-linears 0.2.5 0.2.4 "$F::test_activation_checkpointing_matches_eager_te[functional-jit-delayed]" & pids+=($!)
b thunderfx-fix functional-thunderfx-checkpointing-backward-unbound 0.2.5 0.2.4 "$F::test_activation_checkpointing_matches_eager_te[functional-thunderfx-delayed]" & pids+=($!)
wait "${pids[@]}"
kill %1
for f in /tmp/bis/*.out; do echo "== $(basename $f .out)"; tail -25 $f; done > $OUT/summary.txt
cd /tmp/bis && tar czf $OUT/bisects.tgz vmstat.txt *.out */bisect.json */bisect.txt */*.json */*.log
