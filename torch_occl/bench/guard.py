"""The regression guard: which of occl's rows got slower than a committed baseline, beyond the
run-to-run noise the baseline measured.

    python -m torch_occl.bench.guard baseline BASELINE.json RUN.json RUN.json RUN.json
    python -m torch_occl.bench.guard check BASELINE.json RUN.json [RUN.json ...]

Each RUN.json is a `python -m torch_occl.bench --json` report; runs of one kind (world size,
dtype, transport, launcher, shared tensors, call) only. `baseline` keeps, per row, occl's median of each
run (three runs or more). `check` calls a row slower when even the fastest of the new runs (give
it three) exceeds the slowest baseline run by more than the noise: the row's own spread (slowest
over fastest run) or, if larger, the spread that three quarters of the baseline's rows stay
within, since three runs of one row see too little of it. A machine's noise only slows runs down,
and a burst of it rarely hits one row in three runs; a regression slows them all. It lists every
such row and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import sys

MIN_NOISE = 0.05
TYPICAL_QUANTILE = 0.75  # of the rows' spreads: the noise every row is granted
SETUP_KEYS = ("world_size", "dtype", "transport", "launcher", "shared_tensors", "call",
              "fresh_inputs")
# What a run from before the key existed did.
SETUP_DEFAULTS = {"call": "sync", "fresh_inputs": False}


def _setup(report: dict) -> dict:
    return {key: report.get(key, SETUP_DEFAULTS.get(key)) for key in SETUP_KEYS}


def _key(row: dict) -> str:
    return f"{row['op']} {row['bytes']} B {row['dtype']} {row['redop']}"


def _same_setup(reports: list[dict], what: str) -> dict:
    setups = [_setup(report) for report in reports]
    if any(setup != setups[0] for setup in setups):
        raise SystemExit(f"{what}: runs of different kinds cannot be compared: {setups}")
    return setups[0]


def _spread(times: list[float]) -> float:
    return max(times) / min(times) - 1


def typical_spread(baseline: dict) -> float:
    spreads = sorted(_spread(times) for times in baseline["occl_us"].values())
    return max(spreads[int(TYPICAL_QUANTILE * (len(spreads) - 1))], MIN_NOISE)


def make_baseline(runs: list[dict]) -> dict:
    if len(runs) < 3:
        raise SystemExit("baseline: three runs at least, to see the noise")
    setup = _same_setup(runs, "baseline")
    rows: dict[str, list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            rows.setdefault(_key(row), []).append(row["us"]["occl"])
    return {"setup": setup, "runs": len(runs),
            "occl_us": {key: times for key, times in rows.items() if len(times) == len(runs)}}


def slower_rows(baseline: dict, runs: list[dict]) -> tuple[list[str], int]:
    """Lines naming each row slower beyond the baseline's noise; how many rows were compared."""
    setup = _same_setup(runs, "check")
    if setup != _setup(baseline["setup"]):
        raise SystemExit(f"check: the runs ({setup}) are not of the baseline's kind "
                         f"({_setup(baseline['setup'])})")
    new: dict[str, list[float]] = {}
    for run in runs:
        for row in run["rows"]:
            new.setdefault(_key(row), []).append(row["us"]["occl"])
    typical = typical_spread(baseline)
    lines, compared = [], 0
    for key, before in baseline["occl_us"].items():
        if key not in new:
            continue
        compared += 1
        now = min(new[key])
        noise = max(_spread(before), typical)
        limit = max(before) * (1 + noise)
        if now > limit:
            lines.append(f"slower: {key}: occl {now:.1f} µs, baseline {min(before):.1f}–"
                         f"{max(before):.1f} µs over {len(before)} runs (limit {limit:.1f} µs: "
                         f"the slowest plus {noise:.0%} of noise)")
    return lines, compared


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise SystemExit(f"{path}: not a bench report or baseline ({error})")


def main(argv=None) -> int:
    parse = argparse.ArgumentParser(prog="python -m torch_occl.bench.guard",
                                    description=__doc__.split("\n")[0],
                                    formatter_class=argparse.RawDescriptionHelpFormatter,
                                    epilog=__doc__.split("\n", 2)[2])
    commands = parse.add_subparsers(dest="command", required=True)
    make = commands.add_parser("baseline", help="make BASELINE from several runs")
    make.add_argument("baseline", metavar="BASELINE.json", help="written")
    make.add_argument("runs", metavar="RUN.json", nargs="+", help="bench --json reports")
    check = commands.add_parser("check", help="list the rows slower than BASELINE")
    check.add_argument("baseline", metavar="BASELINE.json", help="read")
    check.add_argument("runs", metavar="RUN.json", nargs="+", help="bench --json reports")
    args = parse.parse_args(argv)
    runs = [_load(path) for path in args.runs]
    if args.command == "baseline":
        baseline = make_baseline(runs)
        with open(args.baseline, "w") as out:
            json.dump(baseline, out, indent=1)
        print(f"{args.baseline}: {len(baseline['occl_us'])} rows from {len(runs)} runs")
        return 0
    lines, compared = slower_rows(_load(args.baseline), runs)
    for line in lines:
        print(line)
    print(f"{len(lines)} of {compared} rows slower than {args.baseline} beyond its noise "
          f"(each row's spread, at least {typical_spread(_load(args.baseline)):.0%})")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
