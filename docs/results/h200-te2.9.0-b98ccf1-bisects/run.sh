#!/usr/bin/env bash
# A GPU call on one H200 with TE 2.9.0 (.gpu/te-2.9.0 and .gpu/bisect-b, PyPI's wheels of thunder 0.2.5.dev20250803
# .. 0.2.5: the tree, the bundle and more wheels than these pass the 64 MiB a call carries): two fix bisects side
# by side, each judged by one registry entry alone (`--entry`), of ranges that end at the last build seen.
# Each bisect's log is copied to $OUT after every step, so a cut-off call keeps its steps. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set.
export PYTHONUNBUFFERED=1
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site > $OUT/install.log 2>&1
rm -rf /tmp/bis; mkdir -p /tmp/bis
F=tests/features/test_feature_parity.py P=tests/ddp/test_ddp_parity.py
b() {
  timeout 175 env PYTHONPATH=$PYTHONPATH:$PWD/src python3 -m teparity bisect --entry $2 --wheels .gpu/bisect-b --good $3 --bad $4 \
    --workdir /tmp/bis/$1 -- "$5" -p no:xdist -p no:cacheprovider > /tmp/bis/$1.out 2>&1
  echo "rc=$?" >> /tmp/bis/$1.out
}
keep() { for n in unreduced-last twice-last; do cp /tmp/bis/$n/bisect.json $OUT/$n.json 2>/dev/null; cp /tmp/bis/$n.out $OUT/$n.out 2>/dev/null; done; }
(while sleep 10; do keep; done) & copier=$!
b unreduced-last functional-amax-not-reduced-across-ranks 0.2.5 0.2.5.dev20250803 "$P::test_first_ddp_step_matches_torch_ddp[functional]" & a=$!
b twice-last functional-checkpointing-updates-fp8-state-twice 0.2.5 0.2.5.dev20250803 "$F::test_activation_checkpointing_matches_eager_te[functional-jit-delayed]" & c=$!
wait $a $c; kill $copier; keep
cd /tmp/bis && tar czf $OUT/bisects.tgz *.out */bisect.json */bisect.txt */*.json */*.log
