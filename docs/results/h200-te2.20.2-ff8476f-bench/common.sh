# Sourced by the GPU script beside it: install the TE 2.20.2 bundle as carried (.gpu/te-2.20.2-run: TE's PyPI wheels with
# the core slimmed to sm_90 and re-zipped with LZMA, the torch extension prebuilt for torch 2.11.0+cu130 and carried
# xz-compressed, their dependencies and thunder 0.2.6's wheel) and unpack thunder 0.2.7.dev20260201 (the contents of its
# PyPI wheel, .gpu/thunder-dev.tar.xz), put first on PYTHONPATH for its runs. Run from the repository root with $OUT set.
export PYTHONUNBUFFERED=1
for packed in .gpu/te-2.20.2-run/*.so.xz; do [ -e "${packed%.xz}" ] || xz -dk "$packed"; done
source .gpu/te-2.20.2-run/install_bundle.sh .gpu/te-2.20.2-run /tmp/site > $OUT/install.log 2>&1
BASE=$PYTHONPATH
mkdir -p /tmp/th /tmp/sum
[ -d /tmp/th/0.2.7.dev20260201 ] || xz -dc .gpu/thunder-dev.tar.xz | tar xf - -C /tmp/th
DEV=/tmp/th/0.2.7.dev20260201
G="tests/trace tests/numerics tests/features tests/ddp tests/fsdp -p no:cacheprovider --tb=short"
{ nproc; nvidia-smi -L; hostname; date +%T; } > /tmp/sum/00-machine.txt
