#!/bin/bash
# Runs nograd_claims.py over every weekly build from 0.2.0.dev20240728 to 0.2.2 (python 3.12.1, torch 2.11.0, /tmp/v312-t211),
# each build unpacked with `pip install --no-deps --target /tmp/th/V /tmp/wheels/lightning_thunder-V-py3-none-any.whl`.
cd "$(dirname "$0")"
for v in 0.2.0.dev20240728 0.2.0.dev20240804 0.2.0.dev20240811 0.2.0.dev20240818 0.2.0.dev20240825 0.2.0.dev20240901 0.2.0.dev20240908 0.2.0.dev20240915 0.2.0.dev20240922 0.2.0.dev20240929 0.2.0.dev20241006 0.2.0.dev20241013 0.2.0.dev20241020 0.2.0.dev20241027 0.2.0.dev20241103 0.2.0.dev20241110 0.2.0.dev20241117 0.2.0.dev20241124 0.2.0.dev20241201 0.2.0.dev20241208 0.2.0.dev20241215 0.2.0.dev20241222 0.2.0.dev20241229 0.2.0.dev20250105 0.2.0.dev20250112 0.2.0.dev20250119 0.2.0.dev20250124 0.2.0.dev20250126 0.2.1.dev20250202 0.2.1 0.2.2.dev0 0.2.2.dev20250209 0.2.2; do
  [ -d /tmp/th/$v ] || pip install -q --no-deps --target /tmp/th/$v /tmp/wheels/lightning_thunder-$v-py3-none-any.whl >/dev/null 2>&1
  echo "=== thunder $v: PYTHONPATH=/tmp/th/$v /tmp/v312-t211/bin/python nograd_claims.py"
  PYTHONPATH=/tmp/th/$v /tmp/v312-t211/bin/python nograd_claims.py 2>&1 | grep -v "Warning\|warnings.warn\|forward trace symbols"
done
