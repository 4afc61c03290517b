#!/usr/bin/env bash
# The GPU runs behind docs/results/: on a host with an FP8 GPU where TransformerEngine and thunder import
# (installed there by pip, or into a folder named by SITE), run one part of the gate, its report and log
# into OUT. teparity ships no TE build or bundle.
#
# usage: scripts/gpu-tiers.sh OUT_DIR PART [pytest args...]
#   gate         tests/trace, tests/numerics, tests/ddp (NCCL, one GPU per rank, where there are 2+ GPUs)
#   harness      harness -m fp8: each GPU check killed by its mutation, the deadlock check
#   ddp-gloo-N   tests/ddp with N gloo ranks sharing GPU 0
#   ddp-nccl-N   tests/ddp with N NCCL ranks, one GPU each
#   bench        python -m teparity bench over the gate: fresh, warm and forked ranks (OUT/NAME/: bench.json,
#                each mode's report and log)
#   repeat-N     python -m teparity repeat N over the gate (OUT/NAME.json: repeat.json; OUT/NAME-runs.tgz:
#                every run's report and log)
#   kill-matrix  python -m teparity kill-matrix --targeted over the GPU kill targets (args: kill-matrix options)
# Writes OUT/NAME.json (parity report; kill-matrix: OUT/kill-matrix-reports.tgz), OUT/NAME.log and
# OUT/NAME.install.log (the versions that import), so that parts can run side by side.
# env: NAME (output basename, default PART); SITE (a folder with TE and thunder installed, put first on
#      PYTHONPATH); THUNDER_WHEEL (a lightning-thunder wheel to use instead, e.g. a dev build: same dependencies)
set -uo pipefail
OUT=${1:?out dir}; PART=${2:?part}; shift 2
NAME=${NAME:-$PART}
installed=$OUT/$NAME.install.log
[ -n "${SITE:-}" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
: > "$installed"
if [ -n "${THUNDER_WHEEL:-}" ]; then
  site=/tmp/site-thunder-$NAME; rm -rf "$site"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$THUNDER_WHEEL" >> "$installed" 2>&1 || exit 1
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -c "import transformer_engine.pytorch, thunder, importlib.metadata as m; print('TransformerEngine', m.version('transformer_engine'), '| lightning-thunder', m.version('lightning-thunder'), '| torch', m.version('torch'))" >> "$installed" 2>&1
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/src" PYTHONUNBUFFERED=1
report=(--teparity-report "$OUT/$NAME.json")
{
case $PART in
  gate) python3 -m pytest tests/trace tests/numerics tests/features tests/ddp tests/fsdp "${report[@]}" "$@" ;;
  harness) python3 -m pytest harness -m fp8 "${report[@]}" "$@" ;;
  ddp-gloo-*) CUDA_VISIBLE_DEVICES=0 python3 -m pytest tests/ddp --teparity-backend gloo \
      --teparity-world-size "${PART#ddp-gloo-}" "${report[@]}" "$@" ;;
  ddp-nccl-*) python3 -m pytest tests/ddp --teparity-backend nccl --teparity-world-size "${PART#ddp-nccl-}" \
      "${report[@]}" "$@" ;;
  bench)
    work=$(mktemp -d)
    python3 -m teparity bench --workdir "$work" -- tests/trace tests/numerics tests/features tests/ddp tests/fsdp "$@"
    status=$?; mkdir -p "$OUT/$NAME"; cp "$work"/*.json "$work"/*.log "$OUT/$NAME/"; exit $status ;;
  repeat-*)
    work=$(mktemp -d)
    python3 -m teparity repeat "${PART#repeat-}" --workdir "$work" -- tests/trace tests/numerics tests/features tests/ddp tests/fsdp "$@"
    status=$?; cp "$work/repeat.json" "$OUT/$NAME.json"; (cd "$work" && tar czf "$OUT/$NAME-runs.tgz" ./run*.json ./run*.log)
    exit $status ;;
  kill-matrix)
    work=$(mktemp -d)
    targets=$(python3 -c 'import sys; sys.path.insert(0, "harness"); import test_gpu_kills as k; print(*k.KILLING_TESTS)')
    # shellcheck disable=SC2086
    python3 -m teparity kill-matrix $targets --targeted --workdir "$work" "$@"
    status=$?; (cd "$work" && tar czf "$OUT/kill-matrix-reports.tgz" ./*.json); exit $status ;;
  *) echo "unknown part $PART" >&2; exit 2 ;;
esac
} 2>&1 | tee "$OUT/$NAME.log"
exit "${PIPESTATUS[0]}"
