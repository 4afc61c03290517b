#!/usr/bin/env bash
# TE 2.9.0's 7 declared stacks at this commit (verdicts against 5993931's), then the PR gate on a thunder source tree:
# its base (0.2.7.dev20260201's files at 2026-02-03) and a PR that makes the functional executor accept
# Float8CurrentScaling, judged against the base's report, and teparity diff of the two.
set -u
export PYTHONUNBUFFERED=1; start=$(date +%s)
W=/tmp/call2; rm -rf $W; mkdir -p $W/matrix $W/pr
nvidia-smi -L > $W/machine.txt; echo "cores: $(nproc)" >> $W/machine.txt
( OUT=$W/matrix timeout 330 bash scripts/gpu-matrix.sh 2.9.0 .gpu/te-2.9.0 .gpu/thunder-builds.tar.xz --timeout-s 310 -- -n 2 -p no:cacheprovider
  echo "matrix exit $? at $(( $(date +%s) - start )) s" >> $W/call.log )
mkdir -p /tmp/prgate && xz -dc .gpu/prgate.tar.xz | tar xf - -C /tmp/prgate
for s in base pr; do sed -i "s#\"url\": \"[^\"]*\"#\"url\": \"file:///tmp/prgate/tree\"#" /tmp/prgate/$s/lightning_thunder-0.2.7.dev0.dist-info/direct_url.json; done
git config --global --add safe.directory /tmp/prgate/tree
SITE=/tmp/te-site-2.9.0
gate() { local site=$1 name=$2; shift 2
  PYTHONPATH=$site:$PWD/src:$SITE timeout 200 python3 -m pytest -n 8 -p no:cacheprovider tests/numerics \
    --teparity-report $W/pr/$name.json "$@" > $W/pr/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - start )) s" >> $W/call.log; }
gate /tmp/prgate/base base
gate /tmp/prgate/pr pr --teparity-base $W/pr/base.json
PYTHONPATH=$PWD/src:$SITE python3 -m teparity diff $W/pr/base.json $W/pr/pr.json > $W/pr/diff.txt 2>&1; echo "exit $?" >> $W/pr/diff.txt
PYTHONPATH=$PWD/src:$SITE python3 -m teparity summary $W/pr/pr.json --base $W/pr/base.json > $W/pr/pr-summary.md 2>&1
PYTHONPATH=/tmp/thunder-builds-2.9.0/0.2.6:$PWD/src:$SITE timeout 150 python3 -m pytest -n 2 -p no:cacheprovider tests/features \
  -k 8bit --teparity-inject=inference-8bit-weight-scale-off --teparity-report=$W/pr/kill-8bit.json > $W/pr/kill-8bit.log 2>&1
echo "kill-8bit exit $? at $(( $(date +%s) - start )) s" >> $W/call.log
(cd $W && tar czf $OUT/call2.tgz .)
cp $W/call.log $W/matrix/matrix.txt $W/pr/diff.txt $OUT/ 2>/dev/null; ls -la $OUT
