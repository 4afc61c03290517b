"""The grad_output amax histories by step of the per-cache-entry model (each twin before each forward) and of the
thunder side's snapshot, functional executor, input shapes (2,16) (2,32) (2,16) (2,32); argv: model|thunder, a port
offset. Run from the repository root at teparity 13aaff2 with PYTHONPATH=$PYTHONPATH:src."""
import os, sys, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", str(29500 + int(sys.argv[2])))
dist.init_process_group("gloo", rank=0, world_size=1)
from teparity.records import PairSpec, Case, STATE_PER_CACHE_ENTRY
from teparity.inrank import sides, defect_models, fp8state
shapes = ((2, 16), (2, 32), (2, 16), (2, 32))
case = Case(activation=None, bias=False, lead_shape=shapes[0])
which = sys.argv[1]
spec = PairSpec("functional", "delayed", (case,), steps=4, lead_shapes_by_step=shapes)
def nz(t): return [(i, round(float(v), 4)) for i, v in enumerate(t.tolist()) if v != 0]
if which == "model":
    spec = PairSpec("functional", "delayed", (case,), steps=4, lead_shapes_by_step=shapes, model=STATE_PER_CACHE_ENTRY)
    real = defect_models.StatePerCacheEntry.forward
    def fwd(self, x):
        for i, t in enumerate(self.twins):
            st = fp8state.eager_snapshot(t)
            print(" pre-forward twin", i, {k: nz(v["grad_output"]["amax_history"]) for k, v in st.items() if "grad_output" in v}, flush=True)
        y = real(self, x); print(" active", self.active, "shape", tuple(x.shape), flush=True); return y
    defect_models.StatePerCacheEntry.forward = fwd
    runs = sides.run_eager(0, 1, spec, "python")
else:
    runs = sides.run_thunder(0, 1, spec)
for step, rec in enumerate(runs[0].steps):
    print(which, "step", step, {k: nz(v["grad_output"]["amax_history"]) for k, v in rec.fp8_state.items()}, "fwd", {k: nz(v["input"]["amax_history"]) for k, v in rec.fp8_state.items()}, flush=True)
print("cache entries", runs[0].cache_entries, runs[0].error)
