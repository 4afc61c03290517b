# The TE 2.12.0 call, right after the TE 2.20.2 call on the same host, carrying .gpu/te-2.12.0 and .gpu/thunder-builds.tar.xz.
export TEPARITY_COMMIT=8440227 CALL_S=300; bash scripts/gpu-call.sh .gpu/thunder-builds.tar.xz 2.12.0=.gpu/te-2.12.0 > $OUT/call.log 2>&1; cat $OUT/call.log; cat $OUT/matrix-te2.12.0.txt
