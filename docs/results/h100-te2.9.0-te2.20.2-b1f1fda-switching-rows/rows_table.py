"""The candidate rows' verdict per stack, from the reports in stacks/ (python3 rows_table.py > rows.md)."""
import glob
import json
import re

grid: dict[str, dict[str, str]] = {}
stacks = []
for path in sorted(glob.glob("stacks/te*-th*.json"), key=lambda p: (p.split("-th")[0], p)):
    stack = path[len("stacks/"):-len(".json")]
    stacks.append(stack)
    for result in json.load(open(path))["results"]:
        for test in result["tests"]:
            name = f"{result['check']} ({result['executor']})"
            cell = test["outcome"]
            if test.get("known_defect"):
                cell += f" ({test['known_defect']})"
            elif cell == "FAIL":
                first = re.sub(r"\s+", " ", test.get("evidence") or "")
                step = re.search(r"step (\d+)", first)
                raised = re.search(r"raised: (\w+)", first)
                cell += f" ({'raises ' + raised.group(1) if raised else 'from step ' + step.group(1) if step else '?'})"
            grid.setdefault(name, {})[stack] = cell
short = [s.replace("te2.", "2.").replace("-th0.2.", " / ") for s in stacks]
print("| row | " + " | ".join(short) + " |")
print("|---" * (len(stacks) + 1) + "|")
for name in sorted(grid):
    print(f"| `{name}` | " + " | ".join(grid[name].get(s, "") for s in stacks) + " |")
