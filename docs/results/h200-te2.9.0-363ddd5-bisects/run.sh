#!/usr/bin/env bash
# A GPU call on one H200 with TE 2.9.0, right after h200-te2.9.0-releases.sh on the same machine (its
# .gpu/te-2.9.0 is still there; this call carries only .gpu/bisect, PyPI's wheels of thunder 0.2.1 .. 0.2.5 and
# the weekly builds between them): seven bisects side by side, each judged by one registry entry alone
# (`--entry`), of a bound set by where earlier runs stopped. Run from the repository root on the device with
# $OUT and TEPARITY_COMMIT set; writes summary.txt and bisects.tgz.
export PYTHONUNBUFFERED=1
[ -d .gpu/te-2.9.0 ] || { echo "no TE 2.9.0 bundle on this machine (a new one: run h200-te2.9.0-releases.sh first)" > $OUT/summary.txt; exit 3; }
source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 /tmp/site-bisect > $OUT/install.log 2>&1
rm -rf /tmp/bis; mkdir -p /tmp/bis
N=tests/numerics/test_numerics_parity.py F=tests/features/test_feature_parity.py P=tests/ddp/test_ddp_parity.py
# b NAME ENTRY GOOD BAD NODEID: one bisect, its log in /tmp/bis/NAME
b() {
  timeout 540 env PYTHONPATH=$PYTHONPATH:$PWD/src python3 -m teparity bisect --entry $2 --wheels .gpu/bisect-a --good $3 --bad $4 \
    --workdir /tmp/bis/$1 -- "$5" -p no:xdist -p no:cacheprovider > /tmp/bis/$1.out 2>&1
  echo "rc=$?" >> /tmp/bis/$1.out
}
vmstat -t 1 > /tmp/bis/vmstat.txt 2>&1 &
pids=()
b miscount-fix legacy-executor-miscounts-te-2.9-saved-tensors 0.2.4 0.2.3 "$N::test_thunder_matches_eager_te[legacy-delayed]" & pids+=($!)
b ckpt-twice-from legacy-checkpointing-records-amax-twice 0.2.3 0.2.4 "$F::test_activation_checkpointing_matches_eager_te[legacy-jit-delayed]" & pids+=($!)
wait "${pids[@]}"
kill %1
for f in /tmp/bis/*.out; do echo "== $(basename $f .out)"; tail -25 $f; done > $OUT/summary.txt
cd /tmp/bis && tar czf $OUT/bisects.tgz vmstat.txt *.out */bisect.json */bisect.txt */*.json */*.log
