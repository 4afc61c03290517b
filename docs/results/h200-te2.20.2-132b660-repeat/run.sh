#!/usr/bin/env bash
# On thunder 0.2.7.dev20260201 + TE 2.20.2, one H200, 2 gloo ranks sharing it, at teparity 132b660:
# `python -m teparity repeat 20` of the whole gate at -n 8, its runs forking from one fork server, starting no run that
# would end past LIMIT_S (default 570) from the script's start. Where /tmp/repeat holds an earlier part (the same
# machine, still held), it continues that repeat (--resume): the new runs are judged with the earlier ones' reports.
# Run from the repository root on the GPU host, with $OUT a writable folder and the TE 2.20.2 bundle at .gpu/te-2.20.2.
export TEPARITY_COMMIT=132b660 PYTHONUNBUFFERED=1
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 > $OUT/install.log 2>&1
export PYTHONPATH=$PYTHONPATH:src
nvidia-smi -L > $OUT/machine.txt
mkdir -p /tmp/repeat
[ -f /tmp/repeat/repeat.json ] && MORE=--resume
s=$(date +%s)
timeout $(( ${LIMIT_S:-570} - SECONDS )) python3 -m teparity repeat 20 ${MORE:-} --deadline-s $(( ${LIMIT_S:-570} - SECONDS - 10 )) \
  --workdir /tmp/repeat -- -n 8 -p no:cacheprovider > $OUT/repeat.txt 2>&1
echo "repeat exit $? in $(( $(date +%s)-s )) s" >> $OUT/repeat.txt
cp /tmp/repeat/repeat.json $OUT/
(cd /tmp/repeat && tar czf $OUT/repeat-runs.tgz repeat.json run*.json run*.log)
