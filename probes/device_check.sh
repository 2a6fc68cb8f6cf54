#!/usr/bin/env bash
# One prepared device check (probes.md section 11): the catalogue on GPU 0 plus GEMM variants.
# Never changes clocks, power limits or MIG. Writes $OUT/summary.json and the landed JSONL; prints a table.
set -u
OUT=${OUT:-/tmp/probe_out}
mkdir -p "$OUT"
PY=""
for cand in python3 python /usr/bin/python3 /opt/conda/bin/python; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch' >/dev/null 2>&1; then PY=$cand; break; fi
done
if [ -z "$PY" ]; then echo "no python with torch"; exit 3; fi
"$PY" -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.version.cuda)'
"$PY" -c 'import pynvml' 2>/dev/null || export PYTHONPATH="logs/device_vendor${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import pynvml, numpy; print("pynvml", pynvml.__file__, "numpy", numpy.__version__)'
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.sm,clocks.max.sm,pcie.link.gen.current,pcie.link.gen.max --format=csv || true
timeout 240 "$PY" -m probes run --all --out-dir "$OUT/landing" --cluster device --node h200 --burn-seconds 30 \
  > "$OUT/run_all.txt" 2> "$OUT/run_all.err"; echo "run --all rc=$?"
cat "$OUT/run_all.txt"; tail -5 "$OUT/run_all.err"
for spec in "tf32 4096" "fp32 4096" "fp16 8192"; do
  set -- $spec
  timeout 40 "$PY" -m probes gemm --out-dir "$OUT/landing" --cluster device --node "h200-gemm-$1" --dtype "$1" --size "$2" \
    2>&1 | tail -1
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = [json.loads(l) for f in sorted((out / "landing").rglob("*.jsonl")) for l in f.read_text().splitlines()]
keep = ("probe", "metric", "value", "unit", "ci_low", "ci_high", "n", "iqr", "peak", "fraction_of_peak", "throttle_class", "status", "reason")
summary = []
for r in rows:
    c = r.get("context") or {}
    item = {k: r.get(k) for k in keep}
    for k in ("clock_event_reasons", "sm_clock_mhz_median", "sm_clock_mhz_min", "power_w_max", "power_w_mean",
              "temp_c_max", "energy_j", "defect_reason_ns_delta", "nvml_samples", "nvml_error", "pcie_link_under_load",
              "triad_verified", "rel_error", "torch", "driver", "stats"):
        if k in c:
            item[k] = c[k]
    summary.append(item)
(out / "summary.json").write_text(json.dumps(summary, indent=1))
(out / "rows").mkdir(exist_ok=True)
print(f"{len(rows)} rows -> summary.json")
PYEOF
for f in $(find "$OUT/landing" -name '*.jsonl'); do cp "$f" "$OUT/rows/"; done
rm -rf "$OUT/landing"
