#!/usr/bin/env bash
# TE 2.9.0 (or the bundle given): the candidate rows on every declared thunder build, side by side with the exploration
# of TE-module models and 8-bit inference. usage: bash .gpu/run74.sh TE BUNDLE
set -u
TE=$1; B=$2; export PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi -L > $OUT/machine.txt
( timeout 480 bash scripts/gpu-matrix.sh "$TE" "$B" .gpu/thunder-builds.tar.xz --timeout-s 420 -- -n 2 -p no:cacheprovider \
   -k "fp8_switched or layers_kept or cuda_graphs or recipe_changes" > $OUT/gpu-matrix.out 2>&1; echo "matrix exit $? at $(( $(date +%s) - start )) s" >> $OUT/gpu-matrix.out ) &
# wait for the TE site the matrix installs, then explore beside it
for i in $(seq 1 60); do [ -e /tmp/te-site-$TE/transformer_engine ] && grep -q . $OUT/install.log 2>/dev/null && sleep 5 && break; sleep 2; done
mkdir -p /tmp/ex; xz -dc .gpu/thunder-builds.tar.xz | tar xf - -C /tmp/ex
jobs=()
for V in 0.2.2 0.2.6 0.2.7.dev20260201; do for C in te-modules-jit-linear te-modules-jit-lnmlp te-modules-thunderfx-linear te-modules-thunderfx-lnmlp; do jobs+=("$V $C"); done; done
for V in 0.2.6 0.2.7.dev20260201; do for C in inference8bit-float32 inference8bit-bfloat16; do jobs+=("$V $C"); done; done
mkdir -p /tmp/exout
printf '%s\n' "${jobs[@]}" | xargs -P 4 -L 1 bash -c 'PYTHONPATH=/tmp/ex/$0:/tmp/te-site-'"$TE"' timeout 240 python3 .gpu/explore.py $1 > /tmp/exout/$0-$1.json 2> /tmp/exout/$0-$1.err'
echo "explore done at $(( $(date +%s) - start )) s" > /tmp/exout/done.txt
wait
(cd /tmp/exout && tar czf $OUT/explore.tgz .)
mkdir -p /tmp/stk && tar xzf $OUT/stacks.tgz -C /tmp/stk && cp $OUT/install.log $OUT/machine.txt $OUT/compatibility.md $OUT/gpu-matrix.out /tmp/stk/ && rm $OUT/stacks.tgz $OUT/machine.txt $OUT/compatibility.md $OUT/gpu-matrix.out
(cd /tmp/stk && tar czf $OUT/stacks.tgz .)
ls -la $OUT
