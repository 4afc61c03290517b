# A/B on this CPU machine (2 cores): the default gate (`pytest -n 2`) at 535fcf4 (before: collection imports torch)
# and 9e77aa3 (after), alternating, twice each; process wall time.
for i in 1 2; do
  for side in before after; do
    if [ $side = before ]; then dir=/tmp/wt-before; else dir=/work/main; fi
    s=$(date +%s%N)
    (cd $dir && PYTHONPATH=$dir/src /work/main/.venv/bin/python -m pytest -n 2 -p no:cacheprovider --basetemp=/tmp/ab-$side-$i --teparity-report=/tmp/ab-$side-$i.json > /tmp/ab-$side-$i.log 2>&1)
    echo "$side run $i: rc=$? wall=$(( ($(date +%s%N)-s)/1000000 )) ms; $(tail -1 /tmp/ab-$side-$i.log)"
  done
done
