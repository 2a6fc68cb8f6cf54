"""Apache Otava behind JSON lines, for bench/bench_detectors.py; runs in Otava's own venv (bench/.venvs/otava).

stdin, one request a line: ``{"id": ..., "values": [...], "params": {"window_len": 50, "max_pvalue": 0.001,
"min_magnitude": 0.0}}`` (missing params take Otava's defaults, those of ``otava.series.AnalysisOptions``).
stdout: first ``{"runner": "otava", "versions": {...}, "import_seconds": ...}``, then one line a request:
``{"id": ..., "changes": [first index of each new regime], "seconds": detection time of this series}``.

The detection is Otava's documented entry point ``otava.analysis.compute_change_points`` (the Hunter
split/merge over E-divisive windows with a Student t-test), which ``otava analyze`` runs per metric.
"""

import time

_t0 = time.perf_counter()
import json  # noqa: E402
import sys  # noqa: E402
from importlib.metadata import version  # noqa: E402

from otava.analysis import compute_change_points  # noqa: E402
from otava.series import AnalysisOptions  # noqa: E402

_IMPORT_SECONDS = time.perf_counter() - _t0


def main() -> None:
    defaults = AnalysisOptions()
    header = {
        "runner": "otava",
        "versions": {name: version(name) for name in ("apache-otava", "numpy", "scipy")},
        "python": sys.version.split()[0],
        "defaults": {k: getattr(defaults, k) for k in ("window_len", "max_pvalue", "min_magnitude")},
        "import_seconds": _IMPORT_SECONDS,
    }
    print(json.dumps(header), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        params = request.get("params", {})
        window_len = int(params.get("window_len", defaults.window_len))
        max_pvalue = float(params.get("max_pvalue", defaults.max_pvalue))
        min_magnitude = float(params.get("min_magnitude", defaults.min_magnitude))
        values = [float(v) for v in request["values"]]
        t0 = time.perf_counter()
        change_points, _ = compute_change_points(
            values, window_len=window_len, max_pvalue=max_pvalue, min_magnitude=min_magnitude
        )
        changes = sorted(int(cp.index) for cp in change_points)
        seconds = time.perf_counter() - t0
        print(json.dumps({"id": request["id"], "changes": changes, "seconds": seconds}), flush=False)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
