#!/usr/bin/env bash
# A planned GPU call, not yet run (the eighth session was lent no device): issue 24's done-when on one H200
# with the TE 2.20.2 bundle (.gpu/te-2.20.2, .gpu/thunder-dev): the bench of the ce65f32 checks (fresh against
# forked), the whole current-thunder gate with serial and with side-by-side sides, thunder 0.2.6's whole gate
# twice (its environment probe cold, then warm), then `repeat` for what time is left. Run from the
# repository root on the device with $OUT and TEPARITY_COMMIT set; writes summary.txt, bench.json,
# repeat.json and logs.tgz.
export PYTHONUNBUFFERED=1
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/th-dev .gpu/thunder-dev/*.whl >> $OUT/install.log 2>&1
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -n 12 -p no:cacheprovider --tb=short"
D=/tmp/th-dev:$BASE:$PWD/src
t() { local s=$(date +%s%N); "$@"; echo "rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; }
r() { local n=$1; shift; echo "== $n $(date +%T)"; t timeout 120 env "$@" > /tmp/$n.log 2>&1; grep -E "teparity time|passed|failed" /tmp/$n.log | tail -2; }
vmstat -t 1 > /tmp/vmstat.txt 2>&1 &
{
  echo "== bench $(date +%T)"
  t timeout 300 env PYTHONPATH=$D python3 -m teparity bench --modes fresh,forked --workdir /tmp/bench -- tests/trace tests/numerics tests/ddp -k "not llama and not fsdp_transform" -n 12 -p no:cacheprovider > /tmp/bench.log 2>&1
  tail -4 /tmp/bench.log
  r dev PYTHONPATH=$D python3 -m pytest $G --basetemp=/tmp/bt-dev --teparity-report /tmp/dev.json
  r sides PYTHONPATH=$D python3 -m pytest $G --teparity-sides side-by-side --basetemp=/tmp/bt-sides --teparity-report /tmp/sides.json
  r th026cold PYTHONPATH=$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-026c --teparity-report /tmp/th026cold.json
  r th026 PYTHONPATH=$BASE:$PWD/src python3 -m pytest $G --basetemp=/tmp/bt-026 --teparity-report /tmp/th026.json
  left=$(( 560 - SECONDS ))
  echo "== repeat $(date +%T), $left s left"
  n=$(( left / 32 )); [ $n -gt 20 ] && n=20   # about 32 s a run (measure the dev run above and adjust)
  [ $n -gt 1 ] && PYTHONPATH=$D timeout $left python3 -m teparity repeat $n --workdir /tmp/rep -- $G > /tmp/repeat.log 2>&1
  echo "repeat rc=$?"; tail -3 /tmp/repeat.log
} > $OUT/summary.txt 2>&1
kill %1
cp /tmp/bench/bench.json /tmp/rep/repeat.json $OUT/ 2>/dev/null
cd /tmp && tar czf $OUT/logs.tgz vmstat.txt *.log *.json bench/*.json bench/*.log rep/*.json rep/*.log $(find bt-* -name "*.log") 2>/dev/null
