"""`python -m perf_assets.lib.simulate [--data-dir D] [--scenario demo] [--seed 7] [--start D] [--days N]`."""

from __future__ import annotations

import argparse

from perf_assets.lib.paths import data_home
from perf_assets.lib.simulate import simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf_assets.lib.simulate", description=__doc__)
    parser.add_argument("--data-dir", default=None, help="PERFWH_HOME override")
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start", default=None, help="YYYY-MM-DD (UTC), default the scenario's")
    parser.add_argument("--days", type=int, default=None)
    args = parser.parse_args(argv)
    result = simulate(data_home(args.data_dir), args.scenario, args.seed, args.start, args.days)
    for source, rows in result.counts.items():
        print(f"{source}\t{result.file_counts[source]} files\t{rows} rows")
    print(f"{len(result.files)} files, {result.size_bytes / 1e6:.1f} MB, {len(result.incidents)} labelled incidents")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
