#!/usr/bin/env bash
# The whole gate on thunder 0.2.7.dev20260201 + TE 2.20.2, one H200, 2 gloo ranks sharing it, forked ranks,
# at teparity 0901221. Run from the repository root on the GPU host, with $OUT a writable folder and the TE 2.20.2
# bundle (TE's PyPI wheels, its torch extension prebuilt for the host's torch, thunder 0.2.7.dev20260201) at .gpu/te-2.20.2.
export TEPARITY_COMMIT=0901221
source .gpu/te-2.20.2/install_bundle.sh .gpu/te-2.20.2 > $OUT/install.log 2>&1
export PYTHONPATH=$PYTHONPATH:src
nvidia-smi -L > $OUT/machine.txt
s=$(date +%s)
timeout 300 python3 -m pytest -n 8 -p no:cacheprovider --teparity-report=$OUT/gate.json > $OUT/gate.log 2>&1
echo "exit $? in $(( $(date +%s)-s )) s" >> $OUT/gate.log
