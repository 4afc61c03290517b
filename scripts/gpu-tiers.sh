#!/usr/bin/env bash
# The GPU run behind docs/results/: on a host with an FP8 GPU and no network, install a bundle made by
# ../shared/gpu/make_bundle.sh, then run the gate and the GPU harness tests, reports and logs into OUT.
#
# usage: scripts/gpu-tiers.sh BUNDLE_DIR OUT_DIR PART [pytest args...]
#   PART: gate (tests/trace, numerics, ddp) | harness (tests/harness -m fp8: mutation kills, deadlock)
set -uo pipefail
BUNDLE=${1:?bundle dir}; OUT=${2:?out dir}; PART=${3:?gate or harness}; shift 3
source "$BUNDLE/install_bundle.sh" "$BUNDLE" > "$OUT/install-$PART.log" 2>&1 || { cat "$OUT/install-$PART.log"; exit 1; }
export PYTHONPATH="$PYTHONPATH:$PWD/src" PYTHONUNBUFFERED=1
grep -h "^note:" "$OUT/install-$PART.log"
case $PART in
  gate) paths=(tests/trace tests/numerics tests/ddp) ;;
  harness) paths=(tests/harness -m fp8) ;;
esac
python3 -m pytest "${paths[@]}" --teparity-report "$OUT/$PART.json" "$@" 2>&1 | tee "$OUT/$PART.log"
exit "${PIPESTATUS[0]}"
