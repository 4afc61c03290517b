#!/bin/bash
# Regenerates the logs of task 1 (CPU only, no TE). Venvs: /tmp/v312-t211 (py3.12.1 torch 2.11.0+cu130),
# /tmp/v311-t211 (py3.11.7 torch 2.11.0), /tmp/v312-t24 (py3.12.1 torch 2.4.1), /tmp/v311-t24 (py3.11.7 torch 2.4.1),
# /tmp/v311-t250 (py3.11.7 torch 2.5.0); thunder wheels from `pip download --no-deps lightning-thunder==V`, unpacked with
# `pip install --no-deps --target /tmp/th/V`.
cd "$(dirname "$0")"
F='Warning|warnings.warn|^  return |^W1203|^  warn'
{
echo "# llama_cpu.py, default executors, no patches"
for vv in v312-t211 v311-t211 v312-t24 v311-t24; do for v in 0.2.0.dev20240728 0.2.0.dev20240901; do
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py 2>&1 | grep -Ev "$F"; echo "exit ${PIPESTATUS[0]}"
done; done
echo "# dev20240901 with the GPU host's claims emulated (torchcompile_cat on CPU tensors, sdpa executor claiming)"
for vv in v312-t211 v311-t211 v312-t24 v311-t24; do v=0.2.0.dev20240901
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py --cat-on-cpu --sdpa-claims"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py --cat-on-cpu --sdpa-claims 2>&1 | grep -Ev "$F"; echo "exit ${PIPESTATUS[0]}"
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py --cat-on-cpu"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python llama_cpu.py --cat-on-cpu 2>&1 | grep -Ev "$F"; echo "exit ${PIPESTATUS[0]}"
done
for extra in "--fork --cat-on-cpu --sdpa-claims" "--fork --cat-on-cpu" "--fork --warm 3 --cat-on-cpu --sdpa-claims"; do v=0.2.0.dev20240901
  echo "=== v312-t211 thunder $v: PYTHONPATH=/tmp/th/$v /tmp/v312-t211/bin/python llama_cpu.py $extra"
  PYTHONPATH=/tmp/th/$v /tmp/v312-t211/bin/python llama_cpu.py $extra 2>&1 | grep -Ev "$F"; echo "exit ${PIPESTATUS[0]}"
done
for ov in 0.12.1 0.13.1 0.14.1 0.16.0; do v=0.2.0.dev20240901
  echo "=== v312-t211 thunder $v optree $ov (pip install --no-deps --target /tmp/optree-$ov-py312 optree==$ov): PYTHONPATH=/tmp/optree-$ov-py312:/tmp/th/$v /tmp/v312-t211/bin/python llama_cpu.py --cat-on-cpu --sdpa-claims"
  PYTHONPATH=/tmp/optree-$ov-py312:/tmp/th/$v /tmp/v312-t211/bin/python llama_cpu.py --cat-on-cpu --sdpa-claims 2>&1 | grep -Ev "$F"; echo "exit ${PIPESTATUS[0]}"
done
} > llama_cpu.log 2>&1
