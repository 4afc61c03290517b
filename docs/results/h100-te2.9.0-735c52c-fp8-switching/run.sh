#!/usr/bin/env bash
# From the repository root on the GPU host (docs/results out of the tree), the tree of 735c52c with tree-diff.txt
# applied, carrying .gpu/te-2.9.0 (the TE 2.9.0 bundle, thunder 0.2.6) and .gpu/thunder-builds.tar.xz (the declared
# thunder builds' wheel contents, a folder per version). The two features-tier runs side by side.
export PYTHONUNBUFFERED=1 TEPARITY_COMMIT=explore
B=.gpu/te-2.9.0
source "$B/install_bundle.sh" "$B" /tmp/te-site > $OUT/install.log 2>&1 || exit 1
mkdir -p /tmp/tb && xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/tb
export PYTHONPATH=$PWD/src:/tmp/te-site
for V in 0.2.6 0.2.7.dev20260201; do
  (PYTHONPATH=/tmp/tb/$V:$PYTHONPATH timeout 300 python3 -m pytest -n 3 -p no:cacheprovider tests/features -k "fp8_switched or layers_kept or cuda_graphs or recipe_changes" --teparity-report $OUT/feat-$V.json > $OUT/feat-$V.log 2>&1) &
done
wait
