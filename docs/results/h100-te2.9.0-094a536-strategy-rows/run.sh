# The strategy rows alone on the 7 TE 2.9.0 stacks, from the repository root on the GPU host at teparity 094a536
# (docs/results out of the tree), carrying .gpu/te-2.9.0 and .gpu/thunder-builds.tar.xz.
export TEPARITY_COMMIT=094a536; timeout 300 bash scripts/gpu-matrix.sh 2.9.0 .gpu/te-2.9.0 .gpu/thunder-builds.tar.xz --timeout-s 260 -- -n 2 tests/ddp tests/fsdp -k "thunderfx or checkpointing" > $OUT/matrix.log 2>&1; echo "exit $?" >> $OUT/matrix.log; cp /tmp/matrix-2.9.0/*.json $OUT/ 2>/dev/null; ls $OUT
