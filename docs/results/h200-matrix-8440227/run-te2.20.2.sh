# The TE 2.20.2 call, right after the TE 2.9.0 call on the same host, carrying .gpu/te-2.20.2 and .gpu/thunder-builds.tar.xz.
export TEPARITY_COMMIT=8440227 CALL_S=540; bash scripts/gpu-call.sh .gpu/thunder-builds.tar.xz 2.20.2=.gpu/te-2.20.2 > $OUT/call.log 2>&1; cat $OUT/call.log; cat $OUT/matrix-te2.20.2.txt
