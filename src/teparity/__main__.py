"""``python -m teparity``: ``doctor`` (what this machine can run, and why not) and ``matrix`` (parity
reports merged into a markdown compatibility table)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from teparity.report import ParityReport, compatibility_matrix


def doctor() -> int:
    from teparity.envprobe import environment
    from teparity.ranks import default_backend

    env = environment()
    print(env.versions.describe())
    print("GPUs:", ", ".join(g.describe() for g in env.gpus) or "none")
    for info in env.executors.values():
        print("TE executor", info.label())
    tiers = {
        "trace tier (tests/trace)": env.backward_sync_reason(),
        "numerics tier (tests/numerics)": env.fp8_reason(),
        "ddp tier (tests/ddp)": env.fp8_reason(),
        "GPU harness (tests/harness -m fp8)": env.fp8_reason(),
    }
    for tier, reason in tiers.items():
        print(f"{tier}: {'runs' if reason is None else 'skips: ' + reason}")
    print(f"multi-rank backend for 2 ranks: {default_backend(2)}")
    return 0


def matrix(paths: list[Path], output: Path | None) -> int:
    reports = [(path.parent.name or str(path), ParityReport.from_json(json.loads(path.read_text()))) for path in paths]
    table = compatibility_matrix(reports) + "\n"
    if output is None:
        sys.stdout.write(table)
    else:
        output.write_text(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teparity", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("doctor", help="what this machine can run, and why not")
    merge = commands.add_parser("matrix", help="merge parity reports into a markdown compatibility table")
    merge.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    merge.add_argument("-o", "--output", type=Path, help="write the table here instead of stdout")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return doctor()
    return matrix(args.reports, args.output)


if __name__ == "__main__":
    sys.exit(main())
