"""Where a gate run's sides went, from the cProfile dumps its ranks wrote (TEPARITY_PROFILE_DIR).

usage: python3 profile_summary.py PROFILE_DIR > summary.txt. A dump is NAME-rankR-PID-N.prof, N the run's number
in its process: each group (a function's first run in its process, its later runs there) gets its total
seconds and its 40 costliest calls by cumulative time, all dumps of the group together.
"""
import collections
import io
import pstats
import re
import sys
from pathlib import Path

dumps = []
for path in Path(sys.argv[1]).glob("*.prof"):
    if match := re.match(r"(.+)-rank(\d+)-(\d+)-(\d+)\.prof$", path.name):
        name, _rank, pid, number = match.groups()
        dumps.append((pid, int(number), name, path))
groups, seen = collections.defaultdict(list), set()
for pid, _number, name, path in sorted(dumps):
    groups[(name, "a later run" if (pid, name) in seen else "its first run in its process")].append(path)
    seen.add((pid, name))
for (name, which), paths in sorted(groups.items()):
    stats = pstats.Stats(*map(str, paths), stream=io.StringIO())
    print(f"== {name}, {which}: {len(paths)} dumps, {stats.total_tt:.1f} s in all, {stats.total_tt / len(paths):.2f} s each")
    text = io.StringIO()
    stats.stream = text
    stats.sort_stats("cumulative").print_stats(40)
    print("\n".join(line[:220] for line in text.getvalue().splitlines()[6:]))
