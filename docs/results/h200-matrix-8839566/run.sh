#!/usr/bin/env bash
# The declared matrix's TE 2.9.0 stacks (thunder 0.2.2 .. 0.2.7.dev20260201) at teparity 8839566 on one H200, 2 gloo
# ranks sharing it, each stack's gate at -n 2 (16 cores, 7 stacks side by side), 480 s a stack at most. Run from the
# repository root on the GPU host, with $OUT writable, the TE 2.9.0 bundle at .gpu/te-2.9.0 and the thunder builds'
# contents at .gpu/thunder-builds.tar.xz.
export TEPARITY_COMMIT=8839566
mkdir -p "$OUT/te-2.9.0"
OUT=$OUT/te-2.9.0 scripts/gpu-matrix.sh 2.9.0 .gpu/te-2.9.0 .gpu/thunder-builds.tar.xz --timeout-s 480
