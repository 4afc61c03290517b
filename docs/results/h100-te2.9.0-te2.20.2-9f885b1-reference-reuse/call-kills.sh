#!/usr/bin/env bash
# The GPU harness (-m fp8: the kill expectations, the clean runs, the fail-fast rank) on thunder 0.2.6 + TE 2.9.0.
set -u
export PYTHONUNBUFFERED=1; start=$(date +%s)
SITE=/tmp/te-site-2.9.0; B=/tmp/thunder-builds-2.9.0
W=/tmp/callk; rm -rf $W; mkdir -p $W
if [ ! -e $SITE/transformer_engine ]; then
  for packed in .gpu/te-2.9.0/*.so.xz; do [ -e "${packed%.xz}" ] || xz -dk "$packed"; done
  source .gpu/te-2.9.0/install_bundle.sh .gpu/te-2.9.0 $SITE > $W/install.log 2>&1
fi
if [ ! -e $B/0.2.6 ]; then mkdir -p $B && xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C $B; fi
nvidia-smi -L > $W/machine.txt; echo "cores: $(nproc)" >> $W/machine.txt
cp /tmp/te-import.log $W/ 2>/dev/null
PYTHONPATH=$B/0.2.6:$PWD/src:$PWD:$SITE timeout 560 python3 -m pytest -n 8 -m fp8 harness -p no:cacheprovider \
  --durations=30 -rfEs > $W/harness-fp8.log 2>&1
echo "harness exit $? at $(( $(date +%s) - start )) s" >> $W/call.log
cp $W/call.log $OUT/; tail -40 $W/harness-fp8.log
(cd $W && tar czf $OUT/callk.tgz .)
