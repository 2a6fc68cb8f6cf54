"""Self-contained HTML reports (docs/reports.md): one job, one alert, the fleet.

Each report is a data function (published warehouse → plain dict, what tests check) and a render
function (dict → HTML string). No network resources: inline SVG (perf_assets/lib/svg.py) and one
inline <style>. Every number carries its unit; a missing value is shown as "unknown", never 0.
"""

from __future__ import annotations

import json
import math
from datetime import date, timedelta
from html import escape
from pathlib import Path
from typing import Any

from perf_assets.lib import svg
from perf_assets.lib.alert_text import escalation_text, impact_text, lost_per_day
from perf_assets.lib.incident_joins import mix_shift_fleet_split
from perf_assets.lib.paths import DataHome
from perf_assets.lib.topology import cohort_nodes
from perf_assets.lib.warehouse import published_frame

BADPUT_LEAVES = (
    "job_startup",
    "device_init",
    "training_prep",
    "ckpt_restore",
    "data_loading_sync",
    "program_startup",
    "ckpt_save",
    "custom_blocking",
    "wasted_progress",
    "fault_detection",
    "badput_other",
)
STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:12px}
th{background:#f2f2f2;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
h2{margin-top:28px;border-bottom:1px solid #ddd}.note{color:#666;font-size:12px}
"""


class ReportError(ValueError):
    """The report cannot be made (unknown job or alert, no published warehouse)."""


# --------------------------------------------------------------------------- formatting


def known(value: Any) -> bool:
    if value is None:
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def num(value: Any, unit: str, digits: int = 4) -> str:
    """A number with its unit, or 'unknown'."""
    if not known(value):
        return "unknown"
    value = float(value)
    text = f"{value:,.0f}" if abs(value) >= 1e4 and abs(value) < 1e12 else f"{value:.{digits}g}"
    return f"{text} {unit}".strip()


def signed(sign: int, value: Any) -> Any:
    """value × sign when it is known, else value as it is (shown as unknown)."""
    return sign * float(value) if known(value) else value


def known_ci(impact: dict) -> bool:
    ci = impact.get("lost_gpu_hours_per_day_ci")
    return isinstance(ci, list | tuple) and len(ci) == 2 and all(known(bound) for bound in ci)


def pct(value: Any, digits: int = 1) -> str:
    return "unknown" if not known(value) else f"{float(value) * 100:+.{digits}f} %"


def share(value: Any) -> str:
    return "unknown" if not known(value) else f"{float(value) * 100:.1f} %"


def fraction(value: Any) -> str:
    return "unknown" if not known(value) else f"{float(value):.4f} (fraction)"


def gpu_seconds(value: Any) -> str:
    return "unknown" if not known(value) else f"{float(value):,.0f} GPU-s ({float(value) / 3600:,.1f} GPU-h)"


def _ratio(numerator: Any, denominator: Any) -> float | None:
    if not known(numerator) or not known(denominator) or float(denominator) == 0:
        return None
    return float(numerator) / float(denominator)


def _clean(value: Any) -> Any:
    """NaN/NaT/None → None, numpy scalars → Python, dates → ISO strings."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "isoformat"):
        try:
            return value.isoformat()
        except ValueError:  # NaT
            return None
    return value


def _records(frame) -> list[dict]:
    return [{key: _clean(value) for key, value in row.items()} for row in frame.to_dict("records")]


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(cell))}</td>' if i >= numeric_from else f"<td>{escape(str(cell))}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, sections: list[str], home: DataHome) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="note">From the published warehouse {escape(str(home.published_db))}. Ratios are '
        "Σnumerator/Σdenominator (never means of ratios); 'unknown' means the warehouse has no value.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )


def write(html: str, out: Path | None, default: Path) -> Path:
    target = Path(out) if out else default
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target


# --------------------------------------------------------------------------- job report


def job_data(home: DataHome, job_id: str) -> dict:
    """fct_job's row, its days, the waterfall from eligible time to useful work, ETTR and traces."""
    jobs = published_frame(home, f"select * from fct_job where job_id = {_quote(job_id)}")
    if jobs.empty:
        raise ReportError(f'no job {job_id!r} in fct_job (perfwh sql "select job_id from fct_job" lists them)')
    job = _records(jobs)[0]
    days = _records(
        published_frame(home, f"select * from fct_job_day where job_id = {_quote(job_id)} order by metric_date")
    )
    spine = {
        "S": ("scheduling_goodput", job["allocated_gs"], job["eligible_gs"], "GPU-s allocated / GPU-s eligible"),
        "R": ("runtime_goodput", job["productive_gs"], job["allocated_gs"], "GPU-s productive / GPU-s allocated"),
        "P": ("program_goodput", job["useful_flop"], job["productive_pfs"], "useful FLOP / productive peak-FLOP-s"),
        "G": ("job_goodput", job["useful_flop"], job["eligible_pfs"], "useful FLOP / eligible peak-FLOP-s"),
        "ETTR": ("time_goodput", job["productive_gs"], job["eligible_gs"], "GPU-s productive / GPU-s eligible"),
    }
    factors = {
        key: {"column": column, "value": job.get(column), "numerator": n, "denominator": d, "units": units}
        for key, (column, n, d, units) in spine.items()
    }
    eligible = job["eligible_pfs"]
    steps = [("queue_initial", job["queue_initial_pfs"]), ("queue_requeue", job["queue_requeue_pfs"])]
    steps += [(leaf, job.get(f"{leaf}_pfs")) for leaf in BADPUT_LEAVES]
    program_loss = (
        float(job["productive_pfs"]) - float(job["useful_flop"])
        if known(job.get("useful_flop")) and known(job.get("productive_pfs"))
        else None
    )
    steps.append(("program (P) loss", program_loss))
    waterfall = {
        "unit": "share of eligible peak-FLOP-s",
        "start": ("eligible", 1.0 if known(eligible) and float(eligible) > 0 else None),
        "steps": [(name, _ratio(value, eligible)) for name, value in steps],
        "end": ("useful work (G)", _ratio(job.get("useful_flop"), eligible)),
        "subtotals": {1: "allocated", len(steps) - 2: "productive"},
    }
    leaves = [
        {
            "leaf": leaf,
            "gs": job.get(f"{leaf}_gs"),
            "pfs": job.get(f"{leaf}_pfs"),
            "share_of_allocated": _ratio(job.get(f"{leaf}_gs"), job["allocated_gs"]),
        }
        for leaf in BADPUT_LEAVES
    ]
    expected = None
    if days:
        listed = ", ".join(_quote(day["metric_date"]) for day in days)
        peers = published_frame(
            home,
            "select sum(productive_gs) as productive_gs, sum(eligible_gs) as eligible_gs, count(distinct job_id) as jobs "
            f"from fct_job_day where cluster = {_quote(job['cluster'])} and metric_date in ({listed})",
        )
        row = _records(peers)[0]
        expected = {"value": _ratio(row["productive_gs"], row["eligible_gs"]), "jobs": row["jobs"]} | row
    stragglers = _records(
        published_frame(
            home,
            "select step, rank_count, busiest_rank, straggler_ratio, max_busy_ns, mean_busy_ns "
            f"from intermediate.int_traces__step_stragglers where job_id = {_quote(job_id)} "
            "order by straggler_ratio desc nulls last limit 20",
        )
    )
    rank_idle = _records(
        published_frame(
            home,
            "select rank, idle_ns, host_wait_share, kernel_wait_share, other_share "
            f"from intermediate.int_traces__rank_idle where job_id = {_quote(job_id)} order by idle_ns desc limit 20",
        )
    )
    return {
        "job": job,
        "days": days,
        "factors": factors,
        "waterfall": waterfall,
        "leaves": leaves,
        "expected_ettr": expected,
        "stragglers": stragglers,
        "rank_idle": rank_idle,
    }


def render_job(data: dict, home: DataHome) -> str:
    job, factors = data["job"], data["factors"]
    units = {
        "S": ("GPU-s", "GPU-s"),
        "R": ("GPU-s", "GPU-s"),
        "P": ("FLOP", "peak-FLOP-s"),
        "G": ("FLOP", "peak-FLOP-s"),
        "ETTR": ("GPU-s", "GPU-s"),
    }
    names = {
        "S": "scheduling goodput S",
        "R": "runtime goodput R",
        "P": "program goodput P",
        "G": "job goodput G = S × R × P",
        "ETTR": "time goodput (ETTR) = S × R",
    }
    spine_rows = [
        [
            names[key],
            fraction(f["value"]),
            num(f["numerator"], units[key][0]),
            num(f["denominator"], units[key][1]),
            f["units"],
        ]
        for key, f in factors.items()
    ]
    product = [factors[k]["value"] for k in "SRP"]
    product_text = (
        f"{product[0]:.4f} × {product[1]:.4f} × {product[2]:.4f} = {product[0] * product[1] * product[2]:.4f} (fraction)"
        if all(known(v) for v in product)
        else "unknown (a factor is unknown)"
    )
    about = [
        ["cluster", job["cluster"]],
        ["SKU", job.get("sku") or "unknown"],
        ["workload", job.get("workload") or "unknown"],
        ["owner", job.get("owner") or "unknown"],
        ["dtype", job.get("dtype") or "unknown"],
        ["final state", job.get("final_state") or "unknown"],
        ["GPUs", num(job.get("gpus"), "GPUs")],
        ["attempts", num(job.get("attempt_count"), "attempts")],
        ["restarts", num(job.get("restarts"), "restarts")],
        ["days in window", num(job.get("job_days"), "days")],
        ["steps", num(job.get("step_count"), "steps")],
        ["first eligible", job.get("first_eligible_at") or "unknown"],
        ["first start", job.get("first_start_at") or "unknown"],
        ["last end", job.get("last_end_at") or "unknown"],
        ["FLOPs metadata", "yes" if job.get("has_flops_metadata") else "no (P and G unknown where missing)"],
    ]
    fall = data["waterfall"]
    leaf_rows = [
        [leaf["leaf"], gpu_seconds(leaf["gs"]), num(leaf["pfs"], "peak-FLOP-s"), fraction(leaf["share_of_allocated"])]
        for leaf in data["leaves"]
    ]
    day_rows = [
        [
            day["metric_date"],
            day.get("sku") or "unknown",
            num(day.get("gpus"), "GPUs"),
            num(day.get("attempts"), ""),
            gpu_seconds(day.get("eligible_gs")),
            gpu_seconds(day.get("allocated_gs")),
            gpu_seconds(day.get("productive_gs")),
            fraction(day.get("scheduling_goodput")),
            fraction(day.get("runtime_goodput")),
            fraction(day.get("program_goodput")),
            fraction(day.get("job_goodput")),
            fraction(day.get("time_goodput")),
        ]
        for day in data["days"]
    ]
    expected = data["expected_ettr"]
    ettr = factors["ETTR"]["value"]
    if expected and known(expected["value"]):
        gap = ettr - expected["value"] if known(ettr) else None
        ettr_text = (
            f"ETTR {fraction(ettr)} against {fraction(expected['value'])} expected (the pooled ETTR of all "
            f"{expected['jobs']} jobs on cluster {job['cluster']} on the same days: "
            f"{gpu_seconds(expected['productive_gs'])} productive / {gpu_seconds(expected['eligible_gs'])} eligible); "
            f"difference {num(gap, '(fraction)')}."
        )
    else:
        ettr_text = f"ETTR {fraction(ettr)}; expected: unknown (no job-days of this cluster on the job's days)."
    if data["stragglers"]:
        traces = table(
            ["step", "ranks", "busiest rank", "straggler ratio", "max busy", "mean busy"],
            [
                [
                    s["step"],
                    num(s["rank_count"], "ranks"),
                    s["busiest_rank"],
                    num(s["straggler_ratio"], "(max/mean)"),
                    num(s["max_busy_ns"], "ns"),
                    num(s["mean_busy_ns"], "ns"),
                ]
                for s in data["stragglers"]
            ],
        )
        if data["rank_idle"]:
            traces += table(
                ["rank", "idle", "host wait share", "kernel wait share", "other share"],
                [
                    [
                        r["rank"],
                        num(r["idle_ns"], "ns"),
                        fraction(r["host_wait_share"]),
                        fraction(r["kernel_wait_share"]),
                        fraction(r["other_share"]),
                    ]
                    for r in data["rank_idle"]
                ],
            )
    else:
        traces = "<p>No traces for this job: no straggler or rank-idle data (int_traces__*).</p>"
    sections = [
        "<h2>Job</h2>" + table(["", ""], about, numeric_from=2),
        "<h2>S × R × P = G</h2>"
        + table(["factor", "value", "numerator", "denominator", "ratio of"], spine_rows, 1)
        + f"<p>{escape(product_text)}</p>",
        "<h2>Waterfall: eligible time → useful work</h2>"
        + svg.waterfall(fall["start"], fall["steps"], fall["end"][0], unit=fall["unit"], subtotals=fall["subtotals"]),
        "<h2>Badput leaves</h2>" + table(["leaf", "GPU-seconds", "peak-FLOP-seconds", "share of allocated"], leaf_rows),
        "<h2>ETTR against expected</h2>" + f"<p>{escape(ettr_text)}</p>",
        "<h2>Per day</h2>"
        + table(
            ["day", "SKU", "GPUs", "attempts", "eligible", "allocated", "productive", "S", "R", "P", "G", "ETTR"],
            day_rows,
            numeric_from=2,
        ),
        "<h2>The ladder and stragglers</h2>"
        + "<p>The step-time ladder of P (step stability, rank balance ...) is not computed by the warehouse yet "
        "(docs/metric_tree.md).</p>" + traces,
    ]
    return page(f"Job {job['job_id']}", sections, home)


def job_report(home: DataHome, job_id: str, out: Path | None = None) -> Path:
    html = render_job(job_data(home, job_id), home)
    return write(html, out, home.reports_dir / f"job-{_safe(job_id)}.html")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


# --------------------------------------------------------------------------- alert report


def find_alert(home: DataHome, alert_id: str) -> dict:
    from perf_assets.lib.alerts import AlertError, _resolve_id, fold, read_events

    try:
        return _resolve_id(fold(read_events(home.alerts_dir)), alert_id)
    except AlertError as error:
        raise ReportError(str(error)) from None


def alert_data(home: DataHome, alert_id: str) -> dict:
    alert = find_alert(home, alert_id)
    grain, entity, metric = alert["grain"], alert["entity_id"], alert["headline_metric"]
    evidence = alert["metrics"].get(metric, {})
    if grain == "cohort":  # the nodes that took one rollout (rollout_canary.py): Σ/Σ of their node rows per day
        nodes = ", ".join(_quote(node) for node in sorted(cohort_nodes(entity)))
        sql = (
            "select metric_date, sum(numerator) as numerator, sum(denominator) as denominator, "
            "sum(numerator) / nullif(sum(denominator), 0) as value, any_value(unit) as unit from metric_tree_daily "
            f"where grain = 'node' and entity_id in ({nodes}) and node_id = {_quote(metric)} "
            "group by metric_date order by metric_date"
        )
    else:
        sql = (
            "select metric_date, numerator, denominator, value, unit from metric_tree_daily "
            f"where grain = {_quote(grain)} and entity_id = {_quote(entity)} and node_id = {_quote(metric)} "
            "order by metric_date"
        )
    series = _records(published_frame(home, sql))
    ids = ", ".join(_quote(i) for i in alert.get("regression_ids") or []) or "''"
    alert_rows = _records(published_frame(home, f"select * from regressions where regression_id in ({ids})"))
    rows = [r for r in alert_rows if (r["grain"], r["entity_id"], r["metric"]) == (grain, entity, metric)]
    headline = rows[0] if rows else {}
    fleet_side = mix_shift_fleet_split(alert_rows)  # a table written before the column: no fleet_split, None
    units = published_frame(home, "select node_id, any_value(unit) as unit from metric_tree_daily group by node_id")
    units = dict(zip(units["node_id"], units["unit"]))
    factors = json.loads(headline.get("factor_log_contributions") or "{}")
    causes = json.loads(headline.get("cause_candidates") or "[]")
    if not causes and alert.get("top_cause"):
        causes = [alert["top_cause"]]
    before, effect = evidence.get("before_level"), evidence
    band = None
    if known(before) and known(effect.get("ci_low")) and known(effect.get("ci_high")):
        band = (before * (1 + effect["ci_low"]), before * (1 + effect["ci_high"]))
    return {
        "alert": alert,
        "evidence": evidence,
        "series": series,
        "unit": series[0]["unit"] if series else None,
        "band": band,
        "factors": factors,
        "causes": causes,
        "coinciding": json.loads(headline.get("coinciding_changes") or "[]") or alert.get("coinciding_changes") or [],
        "children": alert.get("children") or [],
        "units": units,
        "impact": alert.get("impact") or {},
        "fleet_split": None if fleet_side is None else {"entity_id": fleet_side[0]["entity_id"], **fleet_side[1]},
        "split": {
            "segment_type": headline.get("segment_type"),
            "mix_effect": headline.get("mix_effect"),
            "rate_effect": headline.get("rate_effect"),
            "occupancy_effect": float(headline["occupancy_effect"])
            if known(headline.get("occupancy_effect"))
            else None,
            "mix_basis": headline.get("mix_basis"),
            "attribution": headline.get("attribution"),
            "segments": json.loads(headline.get("segments") or "[]"),
        },
    }


def _previous_day(day: str) -> str:
    return (date.fromisoformat(day) - timedelta(days=1)).isoformat()


def render_alert(data: dict, home: DataHome, children_shown: int = 60) -> str:
    alert, ev = data["alert"], data["evidence"]
    metric, unit = alert["headline_metric"], data["unit"] or "fraction"
    days = [row["metric_date"] for row in data["series"]]
    change = ev.get("change_date") or alert["change_date"]
    levels, bands = [], []
    if days and ev.get("before_start_date"):
        first = max(ev["before_start_date"], days[0])
        last_before = _previous_day(change)
        last = min(ev.get("after_end_date") or days[-1], days[-1])
        levels = [
            (first, last_before, ev.get("before_level"), f"before {num(ev.get('before_level'), '')}"),
            (change, last, ev.get("after_level"), f"after {num(ev.get('after_level'), '')}"),
        ]
        if data["band"]:
            bands = [(change, last, *data["band"])]
    chart = svg.line_chart(
        days,
        {metric: [row["value"] for row in data["series"]]},
        y_label=f"{metric} ({unit})",
        markers=[(change, f"change {change}")],
        levels=levels,
        bands=bands,
        title=f"{metric} of {alert['entity_id']}",
    )
    entity = "fleet" if alert["grain"] == "fleet" else f"{alert['grain']} {alert['entity_id']}"
    impact = data["impact"]
    # the store's figures are losses (−ΔG × hours): an improvement's is negative and reads as a gain
    lost, _ = lost_per_day(impact)
    word, sign = ("gained", -1) if lost is not None and lost < 0 else ("lost", 1)
    ci = sorted(sign * bound for bound in impact["lost_gpu_hours_per_day_ci"]) if known_ci(impact) else None
    facts = [
        ["alert id", alert["alert_id"]],
        ["status", alert["status"]],
        ["severity", alert.get("severity") or "unknown"],
        ["escalation", escalation_text(alert.get("escalation")) or "none"],
        ["confidence", alert.get("confidence") or "unknown"],
        ["verdict", alert.get("verdict") or "unknown"],
        ["entity", entity],
        ["headline metric", metric],
        ["change day", change],
        ["before level", num(ev.get("before_level"), unit)],
        ["after level", num(ev.get("after_level"), unit)],
        ["relative effect", pct(ev.get("relative_effect"))],
        ["95 % CI of the effect", f"{pct(ev.get('ci_low'))} to {pct(ev.get('ci_high'))}"],
        ["p-value / q-value", f"{num(ev.get('p_value'), '')} / {num(ev.get('q_value'), '')}"],
        ["windows", f"{ev.get('before_start_date') or 'unknown'} .. {ev.get('after_end_date') or 'unknown'}"],
        ["goodput before", num(impact.get("goodput_before"), "(fraction)")],
        ["impact", impact_text(impact)],
        [f"{word} GPU-hours per day", num(signed(sign, impact.get("lost_gpu_hours_per_day")), "GPU-h/day")],
        [
            f"95 % CI of the {'gain' if sign < 0 else 'loss'}",
            f"{num(ci[0], 'GPU-h/day')} to {num(ci[1], 'GPU-h/day')}" if ci else "unknown",
        ],
        [
            f"{word} H100-equivalent hours per day",
            num(signed(sign, impact.get("lost_h100_equivalent_hours_per_day")), "H100-h/day"),
        ],
        ["installed GPU-hours per day", num(impact.get("installed_gpu_hours_per_day"), "GPU-h/day")],
    ]
    factor_items = sorted(data["factors"].items(), key=lambda item: -abs(item[1]) if known(item[1]) else 0)
    factor_section = (
        svg.bar_chart(factor_items, unit="Δln", title="factor log contributions")
        + table(["factor", "log contribution"], [[k, num(v, "Δln")] for k, v in factor_items])
        if factor_items
        else "<p>No factor decomposition for this metric (unknown).</p>"
    )
    cause_rows = [
        [
            c.get("dimension") or "unknown",
            c.get("value") or "unknown",
            c.get("from") or "unknown",
            c.get("to") or "unknown",
            f"{len(c['nodes'])} nodes ({pct(c.get('share_of_entity_nodes'), 0).lstrip('+')} of the entity)"
            if c.get("nodes")
            else "unknown",
            pct(c.get("did_effect")),
            f"{pct(c['did_ci'][0])} to {pct(c['did_ci'][1])}" if c.get("did_ci") else "unknown",
            ", ".join(c.get("tied_with") or []) or "none",
        ]
        for c in data["causes"]
    ]
    split = data.get("split") or {}
    if split.get("attribution"):
        occupancy = split.get("occupancy_effect")
        basis = escape(str(split.get("mix_basis") or "the ratio's denominator"))
        segment_section = (
            f"<p>Of the pooled change, {pct(split['mix_effect'])} comes from the weights of its "
            f"{escape(str(split['segment_type']))}s moving (mix; weights: shares of {basis}) and "
            f"{pct(split['rate_effect'])} from their own ratios (rate)"
            + (
                f", and {pct(occupancy)} from the share of capacity at work moving (occupancy)"
                if occupancy is not None
                else ""
            )
            + f": reported as <b>{escape(str(split['attribution']))}</b>.</p>"
            + table(
                ["segment", "weight before", "weight after", "ratio before", "ratio after", "mix part", "rate part"]
                + (["occupancy part"] if occupancy is not None else []),
                [
                    [
                        str(seg["segment"]),
                        share(seg.get("weight_before")),
                        share(seg.get("weight_after")),
                        num(seg.get("rate_before"), unit),
                        num(seg.get("rate_after"), unit),
                        pct(seg.get("mix_effect")),
                        pct(seg.get("rate_effect")),
                    ]
                    + ([pct(seg.get("occupancy_effect"))] if occupancy is not None else [])
                    for seg in split["segments"]
                ],
            )
        )
    else:
        segment_section = "<p>No segment split for this entity and metric (node and GPU changes have none).</p>"
    fleet = data.get("fleet_split")
    if fleet:
        occupancy = fleet.get("occupancy_effect")
        segment_section += (
            f"<p>The fleet over the windows of {escape(str(fleet['entity_id']))}'s allocation change "
            f"({escape(str(fleet['before_start_date']))} to the day before {escape(str(fleet['change_date']))}, vs "
            f"{escape(str(fleet['change_date']))} to {escape(str(fleet['after_end_date']))}): "
            f"{escape(str(fleet['metric']))} {pct(fleet.get('relative_change'))}, of which mix "
            f"{pct(fleet.get('mix_effect'))} (weights: shares of {escape(str(fleet.get('mix_basis')))}), rate "
            f"{pct(fleet.get('rate_effect'))}"
            + (f", occupancy {pct(occupancy)}" if occupancy is not None else "")
            + (
                f"; the shift's own clusters ({escape(', '.join(fleet['pair']))}) contributed mix "
                f"{pct(fleet.get('pair_mix_effect'))}, rate {pct(fleet.get('pair_rate_effect'))}"
                + (
                    f", occupancy {pct(fleet.get('pair_occupancy_effect'))}"
                    if fleet.get("pair_occupancy_effect") is not None
                    else ""
                )
                + " (the other clusters' parts are other incidents')"
                if fleet.get("pair")
                else ""
            )
            + f": reported as <b>{escape(str(fleet['attribution']))}</b> (whether or not the fleet's own series "
            "changed enough to be detected).</p>"
            + table(
                ["cluster", "weight before", "weight after", "ratio before", "ratio after", "mix part", "rate part"],
                [
                    [
                        str(seg["segment"]),
                        share(seg.get("weight_before")),
                        share(seg.get("weight_after")),
                        num(seg.get("rate_before"), "fraction"),
                        num(seg.get("rate_after"), "fraction"),
                        pct(seg.get("mix_effect")),
                        pct(seg.get("rate_effect")),
                    ]
                    for seg in fleet.get("segments") or []
                ],
            )
        )
    children = sorted(data["children"], key=lambda c: -abs(c.get("relative_effect") or 0))
    child_rows = [
        [
            c["grain"],
            c["entity_id"],
            c["metric"],
            c.get("change_date") or "unknown",
            num(c.get("before_level"), data["units"].get(c["metric"]) or "(unit unknown)"),
            num(c.get("after_level"), data["units"].get(c["metric"]) or "(unit unknown)"),
            pct(c.get("relative_effect")),
            f"{pct(c.get('ci_low'))} to {pct(c.get('ci_high'))}",
        ]
        for c in children[:children_shown]
    ]
    more = len(children) - len(child_rows)
    sections = [
        f"<p>{escape(alert['summary'])}</p>",
        "<h2>Evidence and impact</h2>" + table(["", ""], facts, numeric_from=2),
        f"<h2>{escape(metric)} with the change and its band</h2>"
        + chart
        + '<p class="note">Dashed: pooled before/after levels; shaded: the after level implied by the 95 % CI '
        "of the relative effect (before level × (1 + CI)).</p>",
        "<h2>Factor contributions</h2>" + factor_section,
        "<h2>Segments: mix versus rate</h2>" + segment_section,
        "<h2>Cause candidates</h2>"
        + (
            table(
                [
                    "dimension",
                    "value",
                    "from",
                    "to",
                    "nodes",
                    "diff-in-diff effect",
                    "95 % CI",
                    "changed together with",
                ],
                cause_rows,
                5,
            )
            + (
                '<p class="note">Candidates that changed together on the same nodes have the same estimate: the data '
                "cannot separate them; they are listed most specific first (docs/detection.md).</p>"
                if any(c.get("tied_with") for c in data["causes"])
                else ""
            )
            if cause_rows
            else "<p>No cause candidates (unknown).</p>"
        ),
        "<h2>Coinciding changes</h2>"
        + (
            table(
                ["component", "from", "to", "nodes", "first at"],
                [
                    [
                        c.get("component", "unknown"),
                        c.get("from", "unknown"),
                        c.get("to", "unknown"),
                        f"{c.get('nodes', 'unknown')} of {c.get('of_nodes', 'unknown')} nodes",
                        c.get("first_at", "unknown"),
                    ]
                    for c in data["coinciding"]
                ],
                3,
            )
            if data["coinciding"]
            else "<p>None recorded.</p>"
        ),
        f"<h2>Children ({len(children)})</h2>"
        + (
            table(["grain", "entity", "metric", "change day", "before", "after", "effect", "95 % CI"], child_rows, 4)
            if child_rows
            else "<p>No children.</p>"
        )
        + (f'<p class="note">{more} more, smaller ones not shown (perfwh alerts --json).</p>' if more > 0 else ""),
    ]
    return page(f"Alert {alert['alert_id']}: {metric} of {entity} from {change}", sections, home)


def alert_report(home: DataHome, alert_id: str, out: Path | None = None) -> Path:
    data = alert_data(home, alert_id)
    return write(render_alert(data, home), out, home.reports_dir / f"alert-{data['alert']['alert_id']}.html")


# --------------------------------------------------------------------------- fleet report


def fleet_data(home: DataHome) -> dict:
    goodput = _records(
        published_frame(
            home,
            "select grain, entity_id, metric_date, value, numerator, denominator from metric_tree_daily "
            "where node_id = 'goodput' and grain in ('fleet', 'cluster') order by metric_date, grain desc, entity_id",
        )
    )
    changes = _records(
        published_frame(
            home,
            "select regression_id, grain, entity_id, metric, change_date, change_kind, relative_effect, ci_low, ci_high "
            "from regressions where grain in ('fleet', 'cluster') order by change_date, grain desc, entity_id, metric",
        )
    )
    lmdi = _records(published_frame(home, "select * from fct_attribution_lmdi order by grain desc, entity_id, factor"))
    mix = _records(
        published_frame(home, "select * from fct_attribution_mix_rate order by grain, metric, segment_type, segment_id")
    )
    from perf_assets.lib.alerts import ACTIVE_STATUSES, read_alerts

    alerts = [a for a in read_alerts(home.alerts_dir) if a["status"] in ACTIVE_STATUSES]
    return {"goodput": goodput, "changes": changes, "lmdi": lmdi, "mix_rate": mix, "alerts": alerts}


def render_fleet(data: dict, home: DataHome, out_dir: Path) -> str:
    days = sorted({row["metric_date"] for row in data["goodput"]})
    lines: dict[str, dict[str, float | None]] = {}
    for row in data["goodput"]:
        name = "fleet" if row["grain"] == "fleet" else row["entity_id"]
        lines.setdefault(name, {})[row["metric_date"]] = row["value"]
    series = {name: [by_day.get(day) for day in days] for name, by_day in lines.items()}
    marks: dict[str, list[str]] = {}
    for change in data["changes"]:
        entity = "fleet" if change["grain"] == "fleet" else change["entity_id"]
        marks.setdefault(change["change_date"], [])
        if entity not in marks[change["change_date"]]:
            marks[change["change_date"]].append(entity)
    chart = svg.line_chart(
        days,
        series,
        y_label="goodput (fraction)",
        markers=[(day, f"{day}: {', '.join(names)}") for day, names in sorted(marks.items())],
        title="fleet and cluster goodput",
    )
    change_rows = [
        [
            c["change_date"],
            c["grain"],
            c["entity_id"],
            c["metric"],
            c["change_kind"],
            pct(c["relative_effect"]),
            f"{pct(c['ci_low'])} to {pct(c['ci_high'])}",
        ]
        for c in data["changes"]
    ]
    lmdi_rows = [
        [
            r["grain"],
            r["entity_id"],
            r["factor"],
            r.get("parent_factor") or "-",
            r["factor_kind"],
            f"{r['period0_start']}..{r['period0_end']} → {r['period1_start']}..{r['period1_end']}",
            num(r["f0"], "(fraction)"),
            num(r["f1"], "(fraction)"),
            num(r["dln"], "Δln"),
            num(r["dg_additive"], "ΔG"),
            share(r["share_of_dln_g"]),
        ]
        for r in data["lmdi"]
    ]
    mix_rows = [
        [
            r["grain"],
            r["metric"],
            r["segment_type"],
            r["segment_id"],
            r.get("mix_basis") or "unknown",
            f"{num(r['w0'], '')} → {num(r['w1'], '')} (weight)",
            f"{num(r['g0'], '')} → {num(r['g1'], '')} (fraction)",
            num(r["mix_contribution"], "ΔG"),
            num(r["rate_contribution"], "ΔG"),
            num(r["total_contribution"], "ΔG"),
        ]
        for r in data["mix_rate"]
    ]
    alert_rows = []
    for alert in data["alerts"]:
        name = f"alert-{alert['alert_id']}.html"
        link = (
            f'<a href="{escape(name)}">{escape(alert["alert_id"])}</a>'
            if (out_dir / name).exists()
            else escape(alert["alert_id"])
        )
        alert_rows.append(
            f"<tr><td>{link}</td><td>{escape(alert['status'])}</td><td>{escape(alert.get('severity') or 'unknown')}</td>"
            f'<td class="n">{escape(impact_text(alert.get("impact")))}</td><td>{escape(alert["change_date"])}</td>'
            f"<td>{escape(alert['summary'])}</td></tr>"
        )
    alerts_html = (
        "<table><thead><tr><th>alert</th><th>status</th><th>severity</th><th>impact</th><th>change day</th>"
        f"<th>summary</th></tr></thead><tbody>{''.join(alert_rows)}</tbody></table>"
        '<p class="note">An id links to its page when alert-ID.html was written alongside (perfwh report --alert ID).</p>'
        if alert_rows
        else "<p>No open alerts.</p>"
    )
    sections = [
        "<h2>Goodput with every fleet and cluster change point</h2>" + chart,
        "<h2>Change points (fleet and cluster)</h2>"
        + (
            table(["change day", "grain", "entity", "metric", "kind", "effect", "95 % CI"], change_rows, 5)
            if change_rows
            else "<p>No change points.</p>"
        ),
        "<h2>LMDI factor attribution (fct_attribution_lmdi)</h2>"
        + (
            table(
                [
                    "grain",
                    "entity",
                    "factor",
                    "parent",
                    "kind",
                    "periods",
                    "f0",
                    "f1",
                    "Δln",
                    "additive ΔG",
                    "share of Δln G",
                ],
                lmdi_rows,
                6,
            )
            if lmdi_rows
            else "<p>No attribution periods.</p>"
        ),
        "<h2>Mix versus rate by segment (fct_attribution_mix_rate)</h2>"
        + (
            table(
                [
                    "grain",
                    "metric",
                    "segment type",
                    "segment",
                    "mix basis",
                    "weight",
                    "rate",
                    "mix",
                    "rate effect",
                    "total",
                ],
                mix_rows,
                5,
            )
            if mix_rows
            else "<p>No segment attribution.</p>"
        ),
        "<h2>Open alerts</h2>" + alerts_html,
    ]
    return page("Fleet goodput report", sections, home)


def fleet_report(home: DataHome, out: Path | None = None) -> Path:
    target = Path(out) if out else home.reports_dir / "fleet.html"
    return write(render_fleet(fleet_data(home), home, target.parent), target, target)
