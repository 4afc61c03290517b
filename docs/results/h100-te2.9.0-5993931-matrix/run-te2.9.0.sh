# From the repository root on the GPU host at teparity 5993931 (docs/results out of the tree), carrying .gpu/te-2.9.0
# and .gpu/thunder-builds.tar.xz: TE 2.9.0's 7 declared stacks side by side (scripts/gpu-call.sh).
export TEPARITY_COMMIT=5993931 CALL_S=420; nvidia-smi -L > $OUT/machine.txt; bash scripts/gpu-call.sh .gpu/thunder-builds.tar.xz 2.9.0=.gpu/te-2.9.0 > $OUT/call.log 2>&1; echo "exit $?" >> $OUT/call.log; ls $OUT
