#!/bin/bash
# Regenerates the logs of task 2. Venvs: /tmp/v312-t211 (py3.12.1 torch 2.11.0), /tmp/v311-t211 (py3.11.7 torch 2.11.0),
# /tmp/v312-t24 (py3.12.1 torch 2.4.1), /tmp/v311-t24 (py3.11.7 torch 2.4.1), /tmp/v311-t250 (py3.11.7 torch 2.5.0); thunder wheels unpacked with
# `pip install --no-deps --target /tmp/th/V lightning_thunder-V-py3-none-any.whl`.
cd "$(dirname "$0")"
{
for vv in v312-t211 v311-t211 v312-t24 v311-t24 v311-t250; do for v in 0.2.0.dev20240728 0.2.0.dev20240901; do
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python checkpoint_cpu.py"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python checkpoint_cpu.py 2>&1 | grep -v "Warning\|warnings.warn"
done; done
for vv in v312-t211 v311-t24; do for v in 0.2.0.dev20241006 0.2.0.dev20241013 0.2.0.dev20241020 0.2.0.dev20241201 0.2.0.dev20241208 0.2.0.dev20241215 0.2.0.dev20241222 0.2.0.dev20241229 0.2.0.dev20250105 0.2.0.dev20250112 0.2.0.dev20250119 0.2.1 0.2.2; do
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python checkpoint_cpu.py"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python checkpoint_cpu.py 2>&1 | grep "^python\|RESULT"
done; done
} > checkpoint_cpu.log 2>&1
{
for vv in v312-t211 v311-t250 v311-t24; do for v in 0.2.0.dev20240728 0.2.0.dev20250112 0.2.2; do
  echo "=== $vv thunder $v: PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python probe_subscript.py"
  PYTHONPATH=/tmp/th/$v /tmp/$vv/bin/python probe_subscript.py 2>&1 | grep -v "Warning\|warnings.warn"
done; done
} > probe_subscript.log 2>&1
