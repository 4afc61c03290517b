#!/bin/bash
# For every lightning-thunder wheel in /tmp/wheels (pip download --no-deps lightning-thunder==V -d /tmp/wheels, for the
# versions `pip index versions lightning-thunder --pre` lists from 0.2.0.dev20240404 to 0.2.6), print each line that calls
# SDPAParams( and whether the build probes hasattr(SDPAParams, "enable_gqa").
cd /tmp/wheels
for w in $(ls lightning_thunder-*.whl | sort -V); do
  v=${w#lightning_thunder-}; v=${v%-py3-none-any.whl}
  for f in $(unzip -Z1 $w | grep '^thunder/.*\.py$'); do
    unzip -p $w $f | grep -n 'SDPAParams(\|hasattr(SDPAParams, "enable_gqa")' | sed "s|^|$v $f:|"
  done
done
