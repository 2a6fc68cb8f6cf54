"""ruptures PELT behind JSON lines, for bench/bench_detectors.py; runs in its own venv (bench/.venvs/ruptures).

stdin, one request a line: ``{"id": ..., "values": [...], "params": {"model": "l2", "c": 2.0, "min_size": 3,
"jump": 1}}``. stdout: first ``{"runner": "ruptures", "versions": {...}, "import_seconds": ...}``, then one line a
request: ``{"id": ..., "changes": [first index of each new regime], "seconds": detection time of this series}``.

Penalty rule (computed per series, inside the timed region):

* ``l2``: ``pen = c * log(n) * sigma**2`` (BIC-like), ``sigma = 1.4826 * MAD(diff(x)) / sqrt(2)``, the noise
  SD estimated from first differences so that steps barely affect it.
* ``rbf``: ``pen = c * log(n)``; the RBF cost is on a kernel scale (ruptures sets the bandwidth by the median
  heuristic), so sigma does not enter.

``c`` is chosen by bench_detectors.py on the tuning seed, never on the held-out one.
"""

import time

_t0 = time.perf_counter()
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from importlib.metadata import version  # noqa: E402

import numpy as np  # noqa: E402
import ruptures as rpt  # noqa: E402

_IMPORT_SECONDS = time.perf_counter() - _t0


def mad_sigma_of_differences(x: np.ndarray) -> float:
    d = np.diff(x)
    if d.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0))


def penalty(x: np.ndarray, model: str, c: float) -> float:
    n = x.size
    if model == "rbf":
        return c * math.log(n)
    sigma = mad_sigma_of_differences(x)
    return c * math.log(n) * max(sigma, 1e-12) ** 2


def detect(x: np.ndarray, model: str, c: float, min_size: int, jump: int) -> list[int]:
    pen = penalty(x, model, c)
    algo = rpt.Pelt(model=model, min_size=min_size, jump=jump).fit(x.reshape(-1, 1) if model == "rbf" else x)
    breakpoints = algo.predict(pen=pen)
    return [int(b) for b in breakpoints if b < x.size]  # the last breakpoint is always n


def main() -> None:
    header = {
        "runner": "ruptures",
        "versions": {name: version(name) for name in ("ruptures", "numpy", "scipy")},
        "python": sys.version.split()[0],
        "import_seconds": _IMPORT_SECONDS,
    }
    print(json.dumps(header), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        params = request.get("params", {})
        x = np.asarray(request["values"], dtype=float)
        t0 = time.perf_counter()
        changes = detect(
            x,
            str(params.get("model", "l2")),
            float(params.get("c", 2.0)),
            int(params.get("min_size", 3)),
            int(params.get("jump", 1)),
        )
        seconds = time.perf_counter() - t0
        print(json.dumps({"id": request["id"], "changes": changes, "seconds": seconds}), flush=False)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
