#!/usr/bin/env bash
# A GPU call on one H200 (issue 24): `python -m teparity repeat 20` of the whole current-thunder gate at -n 8, its runs
# forking from the one fork server the repeat starts, stopping before a run that would end past LIMIT_S (default 585)
# from the call's start (--deadline-s). With RESUME=DIR.tgz (an earlier part's workdir, as this script packed it) it
# continues that repeat (--resume): the new runs are judged with the earlier ones' reports. Run from the repository
# root on the device with $OUT and TEPARITY_COMMIT set.
source docs/plans/h200-te2.20.2-thirteenth/common.sh
mkdir -p /tmp/repeat
if [ -n "${RESUME:-}" ]; then tar xzf "$RESUME" -C /tmp/repeat; MORE=--resume; fi
PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity doctor > /tmp/sum/01-doctor.txt 2>&1
s=$(date +%s%N)
# --deadline-s stops the repeat between runs; timeout is the backstop for a run that overruns the guess.
timeout $(( ${LIMIT_S:-585} - SECONDS )) env PYTHONPATH=$DEV:$BASE:$PWD/src python3 -m teparity repeat 20 ${MORE:-} \
  --deadline-s $(( ${LIMIT_S:-585} - SECONDS - 15 )) --workdir /tmp/repeat -- $G -n 8 > /tmp/repeat.out 2>&1
{ echo "== repeat rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms"; tail -25 /tmp/repeat.out; } > /tmp/sum/02-repeat.txt
cat /tmp/sum/*.txt > $OUT/summary.txt
cp /tmp/repeat/repeat.json $OUT/
(cd /tmp/repeat && tar czf $OUT/repeat-workdir.tgz repeat.json run*.json run*.log)
(cd /tmp && tar czf $OUT/logs.tgz sum repeat.out $(find repeat -name forkserver.log) 2>/dev/null)
