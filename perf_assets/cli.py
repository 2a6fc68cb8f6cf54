"""perfwh: the command line of the GPU fleet performance warehouse."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

from perf_assets.lib.paths import DataHome, data_home

DATA_DIR_HELP = "where everything lives (default: $PERFWH_HOME, else ./data under the project)"


def _home(args: argparse.Namespace) -> DataHome:
    return data_home(args.data_dir)


def cmd_simulate(args: argparse.Namespace) -> int:
    from perf_assets.lib.ingest import landed_files
    from perf_assets.lib.simulate import simulate

    home = _home(args).ensure()
    if args.if_empty and landed_files(home.landing):
        print(f"landing zone {home.landing} already has files: not simulating (drop --if-empty to add more)")
        return 0
    started = time.perf_counter()
    result = simulate(home, scenario=args.scenario, seed=args.seed, start=args.start, days=args.days)
    counts = ", ".join(f"{source} {count}" for source, count in sorted(result.counts.items()))
    print(f"simulated scenario {args.scenario!r} seed {args.seed} in {time.perf_counter() - started:.1f} s: {counts}")
    print(f"{len(result.incidents)} labeled incident(s) in {home.labels_file}")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from perf_assets.lib.ingest import deliver, ingest

    home = _home(args).ensure()
    landed, problems = deliver(
        home, [Path(p) for p in args.paths], source=args.source, cluster=args.cluster, day=args.date
    )
    for problem in problems:
        print(f"not landed: {problem}", file=sys.stderr)
    outcomes = ingest(home, landed) if landed else []
    for outcome in outcomes:
        print(outcome.line())
    quarantined = sum(outcome.status == "quarantined" for outcome in outcomes)
    print(
        f"{len(outcomes)} file(s): {sum(o.status == 'ok' for o in outcomes)} ok, {quarantined} quarantined, "
        f"{sum(o.status == 'already_ingested' for o in outcomes)} already ingested, {len(problems)} not landed"
    )
    return 1 if problems or quarantined else 0


def cmd_reingest(args: argparse.Namespace) -> int:
    from perf_assets.lib.ingest import reingest

    outcomes = reingest(_home(args), args.format, date.fromisoformat(args.since) if args.since else None)
    for outcome in outcomes:
        print(outcome.line())
    print(f"re-ingested {len(outcomes)} file(s) with the current parser of {args.format}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from perf_assets.lib.ingest.lake import CompactionPolicy
    from perf_assets.lib.ingest.run import compact

    policy = CompactionPolicy.from_env()
    if args.min_files is not None:
        policy = CompactionPolicy(min_files=args.min_files, target_bytes=policy.target_bytes)
    since = date.fromisoformat(args.since) if args.since else None
    done = compact(_home(args), table=args.table, since=since, policy=policy)
    for result in done:
        print(result.line())
    print(f"compacted {len(done)} table-day(s)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from perf_assets.lib.build import build
    from perf_assets.lib.report import summary

    home = _home(args)
    started = time.perf_counter()
    ok = build(home, selection=args.select, log_level=args.log_level, full_refresh=args.full_refresh)
    print(f"build {'succeeded' if ok else 'FAILED'} in {time.perf_counter() - started:.1f} s (data: {home.root})")
    if ok and not args.quiet:
        print(summary(home))
    return 0 if ok else 1


def cmd_detect(args: argparse.Namespace) -> int:
    """Series given (FILE, '-', or piped standard input): detect on them. Else: the warehouse detection."""
    from perf_assets.lib.series_io import SeriesInputError, detect_series, read_series

    series_options = {
        "--column": args.column,
        "--denominator-column": args.denominator_column,
        "--jsonl": args.jsonl or None,
        "--max-pvalue": args.max_pvalue,
        "--max-qvalue": args.max_qvalue,
        "--min-effect": args.min_effect,
        "--robust": args.robust or None,
        "--statistic": args.statistic,
        "--seed": args.seed,
        "--scale": args.scale,
        "--min-segment": args.min_segment,
        "--confirm-points": args.confirm_points,
        "--permutations": args.permutations,
        "--better": args.better,
        "--segmentation": args.segmentation,
    }
    text = None
    if args.file == "-" or (args.file is None and not sys.stdin.isatty()):
        text = sys.stdin.read()
        if args.file is None and not text.strip():
            text = None  # nothing piped in (e.g. stdin is /dev/null): the warehouse detection, as before
    elif args.file is not None:
        try:
            text = Path(args.file).read_text()
        except OSError as error:
            print(f"perfwh detect: error: cannot read {args.file}: {error.strerror}", file=sys.stderr)
            return 2
    if text is None:
        given = [name for name, value in series_options.items() if value is not None]
        if given:
            print(
                f"perfwh detect: error: {', '.join(given)} apply to series input (FILE or standard input); "
                "the warehouse detection takes the Dagster config of the `regressions` asset",
                file=sys.stderr,
            )
            return 2
        from perf_assets.lib.build import build

        ok = build(_home(args), selection="regressions*")
        return 0 if ok else 1

    from perf_assets.lib.changepoint import DetectorConfig

    def pick(value, default):
        return default if value is None else value

    try:
        max_qvalue = pick(args.max_qvalue, "0.05")
        config = DetectorConfig(
            max_pvalue=pick(args.max_pvalue, 0.01),
            max_qvalue=None if max_qvalue.lower() == "none" else float(max_qvalue),
            min_relative_effect=pick(args.min_effect, 0.03),
            statistic="rank" if args.robust else pick(args.statistic, "student"),
            seed=pick(args.seed, 0),
            scale=pick(args.scale, "log"),
            min_segment=pick(args.min_segment, 3),
            confirm_points=pick(args.confirm_points, 7),
            n_permutations=pick(args.permutations, 999),
            segmentation=pick(args.segmentation, "split_merge"),
        )
        series = read_series(text, column=args.column, denominator_column=args.denominator_column, jsonl=args.jsonl)
        results = detect_series(series, config, better=args.better)
    except ValueError as error:  # SeriesInputError, a bad knob, a bad number
        kind = "bad input" if isinstance(error, SeriesInputError) else "bad option"
        print(f"perfwh detect: {kind}: {error}", file=sys.stderr)
        return 2
    for result in results:
        print(json.dumps(result))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from perf_assets.lib.report import summary

    home = _home(args)
    if args.job or args.alert or args.fleet:
        from perf_assets.lib import html_report

        out = Path(args.out) if args.out else None
        try:
            if args.job:
                path = html_report.job_report(home, args.job, out)
            elif args.alert:
                path = html_report.alert_report(home, args.alert, out)
            else:
                path = html_report.fleet_report(home, out)
        except (html_report.ReportError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(path)
        return 0
    if args.out:
        print("error: --out goes with --job, --alert or --fleet", file=sys.stderr)
        return 2
    text = summary(home)
    (home.reports_dir / "summary.txt").write_text(text + "\n")
    print(text)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Score the published warehouse's regressions against labels (docs/evaluation.md)."""
    from perf_assets.lib.evaluation import evaluate_home, table_markdown

    home = _home(args)
    labels = Path(args.labels) if args.labels else home.labels_file
    if not labels.exists():
        print(f"perfwh evaluate: error: no labels at {labels} (--labels PATH)", file=sys.stderr)
        return 2
    if not home.published_db.exists():
        print(
            f"perfwh evaluate: error: no published warehouse at {home.published_db} (run perfwh build)", file=sys.stderr
        )
        return 2
    result = evaluate_home(home, labels)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(
            f"Evaluation of {home.published_db} against {labels} (scenario {result.get('scenario')}, seed {result.get('seed')})"
        )
        print(table_markdown(result))
    return 0


def _sql_error(error: Exception) -> str:
    """DuckDB's message, led by what it means here when the query tried to write or reach outside."""
    import duckdb

    text = str(error)
    if (
        isinstance(error, duckdb.PermissionException)
        or "read-only mode" in text
        or "configuration has been locked" in text
    ):
        return (
            f"perfwh sql is read-only (the published snapshot; no files, attachments, extensions or settings): {text}"
        )
    return text


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from perf_assets.lib.warehouse import query_published

    home = _home(args)

    def run(query: str) -> None:
        columns, rows = query_published(home, query)
        if columns:
            print("\t".join(columns))
            for row in rows[: args.max_rows]:
                print("\t".join("NULL" if value is None else str(value) for value in row))
            if len(rows) > args.max_rows:
                print(f"... {len(rows) - args.max_rows} more rows (raise --max-rows)")

    if args.query:
        try:
            run(args.query)
        except (duckdb.Error, FileNotFoundError) as error:
            print(f"error: {_sql_error(error)}", file=sys.stderr)
            return 1
        return 0
    print(f"perfwh sql on {home.published_db} (read-only snapshot). End statements with ';', quit with Ctrl-D.")
    buffer = ""
    while True:
        try:
            line = input("perfwh> " if not buffer else "   ...> ")
        except EOFError:
            print()
            return 0
        buffer += line + "\n"
        if buffer.strip().endswith(";"):
            try:
                run(buffer)
            except Exception as error:  # the prompt stays open after a bad query
                print(f"error: {_sql_error(error)}", file=sys.stderr)
            buffer = ""


def cmd_alerts(args: argparse.Namespace) -> int:
    from perf_assets.lib.alert_text import impact_text
    from perf_assets.lib.alerts import (
        ACTIVE_STATUSES,
        STATUSES,
        AlertError,
        is_silenced,
        read_alerts,
        transition,
        utcnow,
    )

    home = _home(args)
    action = getattr(args, "alerts_command", None) or "list"
    try:
        if action == "deliver":
            from perf_assets.lib.alert_delivery import deliver
            from perf_assets.lib.alerts import load_annotations, load_config

            report = deliver(
                home.alerts_dir,
                load_config(home.root),
                actor=f"cli:{args.by or 'perfwh'}",
                annotations=load_annotations(home.root),
            )
            print(report.line())
            return 0
        if action in ("ack", "resolve", "silence"):
            until = date.fromisoformat(args.until) if action == "silence" else None
            verb = {"ack": "acknowledge", "resolve": "resolve", "silence": "silence"}[action]
            alert = transition(home.alerts_dir, args.alert_id, verb, actor=args.by, note=args.note, until=until)
            extra = f" until {alert['silenced_until']}" if action == "silence" else ""
            print(f"{alert['alert_id']}  {alert['status']}{extra}  ({alert['summary']})")
            return 0
    except (AlertError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    unknown = set((args.status or "").split(",")) - set(STATUSES) - {""}
    if unknown:
        print(f"error: unknown status {', '.join(sorted(unknown))}; one of {', '.join(STATUSES)}", file=sys.stderr)
        return 2
    now = utcnow()
    alerts = read_alerts(home.alerts_dir)
    if args.status:
        alerts = [alert for alert in alerts if alert["status"] in args.status.split(",")]
    elif not args.all:
        alerts = [alert for alert in alerts if alert["status"] in ACTIVE_STATUSES]
    if alerts and not args.json:
        print(
            f"{'ID':<12}  {'STATUS':<12}  {'SEVERITY':<8}  {'CONF':<6}  {'IMPACT':<22}  {'CHANGE':<10}  "
            f"{'ENTITY':<16}  {'OWNER':<10}  {'SILENCED TO':<11}  SUMMARY"
        )
    for alert in alerts:
        if args.json:
            shown = {k: v for k, v in alert.items() if k != "history"} | {
                "impact_text": impact_text(alert.get("impact"))
            }
            print(json.dumps(shown, sort_keys=True, default=str))
            continue
        size = impact_text(alert.get("impact"))  # LOST 12.3 GPU-h/d; an improvement GAINED
        silenced = alert["silenced_until"] if is_silenced(alert, now) else "-"
        entity = "fleet" if alert["grain"] == "fleet" else f"{alert['grain']} {alert['entity_id']}"
        print(
            f"{alert['alert_id']:<12}  {alert['status']:<12}  {alert.get('severity') or '?':<8}  "
            f"{alert.get('confidence') or '?':<6}  {size:<22}  "
            f"{alert['change_date']:<10}  {entity:<16}  {alert.get('owner') or '-':<10}  {silenced:<11}  "
            f"{alert['summary']}"
        )
    if not alerts and not args.json:
        print("no alerts" + ("" if args.all or args.status else " open (--all shows resolved and expected ones)"))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from perf_assets.lib.ingest import ingest
    from perf_assets.lib.probe_runs import run_local_all
    from probes.cli import progress_bar, suite_options, table

    home = _home(args).ensure()
    try:
        options = suite_options(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    path, results = run_local_all(
        home, cluster=args.cluster, node=args.node, backend=args.backend, options=options, progress=progress_bar()
    )
    print(table(results))
    for outcome in ingest(home, [path]):
        print(outcome.line())
    return 1 if any(r.status == "error" for r in results) else 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="perfwh", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--data-dir", help=DATA_DIR_HELP)
        sub.set_defaults(handler=handler)
        return sub

    simulate = command("simulate", "write a simulated fleet's exports into landing/ with labels.json", cmd_simulate)
    simulate.add_argument(
        "--scenario",
        default="demo",
        help="scenario name (demo, incidents, fleet-1k) or path to a scenario .yaml (default: demo; docs/simulator.md)",
    )
    simulate.add_argument("--seed", type=int, default=7, help="random seed; the same seed writes the same files")
    simulate.add_argument(
        "--start", type=date.fromisoformat, default=None, help="first day, YYYY-MM-DD (default: the scenario's)"
    )
    simulate.add_argument("--days", type=int, default=None, help="days to simulate (default: the scenario's)")
    simulate.add_argument("--if-empty", action="store_true", help="do nothing when landing/ already has files")

    ingest = command("ingest", "land files (copy under landing/) and ingest them; one line per file", cmd_ingest)
    ingest.add_argument("paths", nargs="+", help="files or folders (a folder shaped like landing/ keeps its layout)")
    ingest.add_argument("--source", help="the source of every file (default: told from the file's content)")
    ingest.add_argument("--cluster", help="cluster folder to land under (default: 'default')")
    ingest.add_argument("--date", help="capture day folder YYYY-MM-DD (default: the file's modification day, UTC)")

    reingest = command("reingest", "re-read landed files of a format with the current parser", cmd_reingest)
    reingest.add_argument("--format", required=True, help="format name, e.g. sacct_parsable2")
    reingest.add_argument("--since", help="only files captured on or after this day, YYYY-MM-DD")

    compact = command("compact", "merge each table-day's small raw Parquet files into a few files", cmd_compact)
    compact.add_argument("--table", help="one raw table, e.g. raw_dcgm (default: all)")
    compact.add_argument("--since", help="only event days on or after this day, YYYY-MM-DD")
    compact.add_argument(
        "--min-files", type=int, default=None, help="compact a day with more than this many small files (default 4)"
    )

    build = command(
        "build", "ingest, build the warehouse, detect, alert and evaluate: all assets in one in-process run", cmd_build
    )
    build.add_argument("--select", default=None, help="Dagster asset selection (default: everything)")
    build.add_argument("--quiet", action="store_true", help="do not print the summary")
    build.add_argument(
        "--full-refresh",
        action="store_true",
        help="rebuild the incremental dbt models over every lake day (default: only the days that may have changed: "
        "new days, the last PERFWH_INCREMENTAL_LOOKBACK_DAYS (2) and days a late file landed for; docs/incremental.md)",
    )
    build.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="Dagster run log level (default INFO)",
    )

    detect = command(
        "detect",
        "change points of a series (FILE, '-' or piped standard input: one JSON result per series); with no FILE "
        "and standard input a terminal (or empty): re-run the warehouse's change-point detection, alerts and "
        "evaluation",
        cmd_detect,
    )
    detect.add_argument(
        "file",
        nargs="?",
        help="CSV (one column, or --column NAME) or JSON {\"series\": [numbers]}; '-': standard input. "
        "Missing values (null, empty, NaN) are unknown, not zero; indices keep the original numbering. "
        "docs/detection.md",
    )
    detect.add_argument("--column", help="CSV column holding the series (needed when the CSV has several)")
    detect.add_argument("--denominator-column", help="CSV column of denominators (series = column / this)")
    detect.add_argument(
        "--jsonl", action="store_true", help="one JSON series per input line, one result per output line"
    )
    detect.add_argument("--max-pvalue", type=float, help="significance of a scan, permutation p (default 0.01)")
    detect.add_argument(
        "--max-qvalue", help="Benjamini-Hochberg FDR level across the series of the input, or 'none' (default 0.05)"
    )
    detect.add_argument("--min-effect", type=float, help="minimum |relative effect| to report (default 0.03)")
    detect.add_argument("--robust", action="store_true", help="rank-sum scan: for heavy tails and spikes")
    detect.add_argument(
        "--statistic",
        choices=["student", "welch", "rank", "huber"],
        help="scan statistic (default student, as the warehouse's detection; --robust means rank)",
    )
    detect.add_argument("--seed", type=int, help="seed of the permutations and the bootstrap (default 0)")
    detect.add_argument(
        "--scale",
        choices=["log", "linear"],
        help="log (default): values must be > 0; linear: any sign, effect = (after - before) / |before|",
    )
    detect.add_argument("--min-segment", type=int, help="points on each side of a change (default 3)")
    detect.add_argument(
        "--confirm-points", type=int, help="points after a change for the verdict 'confirmed' (default 7)"
    )
    detect.add_argument("--permutations", type=int, help="permutations of the p-value (default 999)")
    detect.add_argument(
        "--segmentation",
        choices=["split_merge", "binary"],
        help="several changes per series: split_merge (default, as the warehouse's detection) or plain binary",
    )
    detect.add_argument(
        "--better", choices=["higher", "lower"], help="adds kind: improvement or regression to each change"
    )
    report = command(
        "report",
        "print (and write reports/summary.txt) goodput, factors, regressions and evaluation; "
        "--job/--alert/--fleet: write a self-contained HTML report instead (docs/reports.md)",
        cmd_report,
    )
    which = report.add_mutually_exclusive_group()
    which.add_argument("--job", metavar="ID", help="HTML report of one job (fct_job's job_id)")
    which.add_argument(
        "--alert", metavar="ID", help="HTML report of one alert (id or a unique prefix of 4+ characters)"
    )
    which.add_argument("--fleet", action="store_true", help="HTML report of the fleet")
    report.add_argument(
        "--out", help="where to write the HTML (default: reports/job-ID.html, alert-ID.html, fleet.html)"
    )

    evaluate = command(
        "evaluate", "score the published warehouse's detections against labels (docs/evaluation.md)", cmd_evaluate
    )
    evaluate.add_argument("--labels", help="labels.json (default: landing/labels.json under the data dir)")
    evaluate.add_argument("--json", action="store_true", help="print the whole evaluation as JSON")

    sql = command("sql", "query the published read-only warehouse (no query: an interactive prompt)", cmd_sql)
    sql.add_argument("query", nargs="?", help="one SQL statement")
    sql.add_argument("--max-rows", type=int, default=200, help="rows to print (default 200)")

    probe = command(
        "probe",
        "run the probe catalogue (or --probe NAME ...) on this host (GPU, else CPU and says so), land and ingest "
        "the results",
        cmd_probe,
    )
    probe.add_argument("--cluster", default="local", help="cluster folder to land under (default: local)")
    probe.add_argument("--node", default=None, help="node name (default: this host's short name)")
    probe.add_argument("--backend", default="auto", help="auto, cuda, torch-cpu or numpy (default: auto)")
    probe.add_argument("--all", action="store_true", help="the whole catalogue (the default without --probe)")
    from probes.cli import add_selection_arguments

    add_selection_arguments(probe)

    alerts = command("alerts", "list, acknowledge, resolve or silence alerts (no subcommand: list)", cmd_alerts)
    alert_commands = alerts.add_subparsers(dest="alerts_command", metavar="{list,ack,resolve,silence,deliver}")

    def alert_command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = alert_commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--data-dir", default=argparse.SUPPRESS, help=DATA_DIR_HELP)
        return sub

    def list_options(target: argparse.ArgumentParser, default) -> None:
        target.add_argument("--json", action="store_true", default=default, help="one JSON object per alert")
        target.add_argument("--all", action="store_true", default=default, help="also resolved and expected alerts")
        target.add_argument("--status", default=default, help="only these statuses, comma-separated")

    list_options(alerts, None)
    list_options(
        alert_command(
            "list",
            "alerts as a table (default: open, notified, acknowledged); IMPACT reads LOST or, for an improvement, "
            "GAINED GPU-hours per day",
        ),
        argparse.SUPPRESS,
    )
    for name, help_text in (("ack", "acknowledge an alert"), ("resolve", "resolve an alert by hand")):
        sub = alert_command(name, help_text)
        sub.add_argument("alert_id", help="alert id (or a unique prefix of 4+ characters)")
        sub.add_argument("--by", default=None, help="who (default: your login name)")
        sub.add_argument("--note", default=None, help="free text stored with the change")
    silence = alert_command("silence", "send nothing for an alert until a day (inclusive, UTC)")
    silence.add_argument("alert_id", help="alert id (or a unique prefix of 4+ characters)")
    silence.add_argument("--until", required=True, help="YYYY-MM-DD")
    silence.add_argument("--by", default=None, help="who (default: your login name)")
    silence.add_argument("--note", default=None, help="free text stored with the change")
    deliver = alert_command("deliver", "send pending alerts now (what the alert_delivery sensor does each tick)")
    deliver.add_argument("--by", default=None, help="actor recorded with the deliveries (default: perfwh)")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
