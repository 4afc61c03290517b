# repro/repro-table.md, from the repository root at 8440227 (on the CPU: the table only joins JSON files). On the host
# the call's own repro-table step stopped at the first file: its --gate glob also took run-matrix's matrix.json
# (repro-table-on-the-host.txt); gpu-call.sh now passes the stacks' reports alone.
python -m teparity repro-table --repros docs/results/h200-matrix-8440227/repro/repro-te2.9.0-th0.2.3.json \
  docs/results/h200-matrix-8440227/repro/repro-te2.9.0-th0.2.4.json \
  --gate docs/results/h200-matrix-8440227/te-2.9.0/te2.9.0-th0.2.3.json docs/results/h200-matrix-8440227/te-2.9.0/te2.9.0-th0.2.4.json \
  --out docs/results/h200-matrix-8440227/repro/repro-table.md
