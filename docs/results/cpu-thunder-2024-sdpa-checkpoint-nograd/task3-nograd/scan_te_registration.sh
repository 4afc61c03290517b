#!/bin/bash
# Which symbol the legacy TE executor module registers, in every wheel in /tmp/wheels (0.2.0.dev20240404 .. 0.2.6):
# the line after each register_implementation( in thunder/executors/transformer_engineex.py (transformer_engine_v1ex.py in 0.2.6).
cd /tmp/wheels
for w in $(ls lightning_thunder-*.whl | sort -V); do
  v=${w#lightning_thunder-}; v=${v%-py3-none-any.whl}
  f=thunder/executors/transformer_engineex.py; unzip -Z1 $w | grep -q transformer_engine_v1ex.py && f=thunder/executors/transformer_engine_v1ex.py
  echo "$v $f: $(unzip -p $w $f | grep -n -A1 'register_implementation(' | grep -v 'register_implementation\|^--' | sed 's/  */ /g' | tr '\n' ' ')"
done
