#!/usr/bin/env bash
# One verification pass on a GPU machine, in parts that each fit a short session:
#   bash benchmarks/gpu_pass.sh selfcheck   # pytest leaderboards/ + the GPU-only tests
#   bash benchmarks/gpu_pass.sh ranked      # vectoradd example, full leaderboard mode, wall time
#   bash benchmarks/gpu_pass.sh profile     # vectoradd example in profile mode (ncu when present)
#   bash benchmarks/gpu_pass.sh accuracy    # benchmarks/timing_accuracy.py (ncu, do_bench, 5 runs)
#   bash benchmarks/gpu_pass.sh all
# Parts can be combined: bash benchmarks/gpu_pass.sh "selfcheck ranked profile".
# The self-check runs on 4 pytest-xdist processes when pytest-xdist is installed.
# Needs the package importable (pip install -e . or PYTHONPATH=.); logs go to $OUT (default ./gpu-pass).
set -u
OUT=${OUT:-./gpu-pass}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
parts=${1:-all}
summary=()
want() { [[ " $parts " == *" $1 "* || $parts == all ]]; }

note() { summary+=("$1"); echo "== $1"; }

if want selfcheck; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  parallel=()
  $PY -c "import xdist" 2>/dev/null && parallel=(-n 4)
  start=$(date +%s.%N)
  $PY -m pytest leaderboards/ "${parallel[@]}" -q -rfEs -p no:cacheprovider 2>&1 | tee "$OUT/selfcheck.log" | tail -40
  note "selfcheck: $(tail -1 "$OUT/selfcheck.log") ($(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}") s)"
  $PY -m pytest $(grep -l "mark.gpu" tests/test_*.py) -m gpu -q -rfEs -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
  note "gpu tests: $(tail -1 "$OUT/gpu-tests.log")"
fi

if want ranked; then
  start=$(date +%s.%N)
  $PY -m pytest submissions/vectoradd/example/submission.py -p no:cacheprovider \
    --kb-mode leaderboard --kb-results "$OUT/vectoradd-ranked.json" 2>&1 | tee "$OUT/ranked.log" | tail -25
  wall=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
  note "vectoradd leaderboard mode: $(tail -1 "$OUT/ranked.log"); wall ${wall} s"
  start=$(date +%s.%N)
  $PY -m pytest submissions/vectoradd/example/submission.py -q -p no:cacheprovider 2>&1 | tail -1
  note "vectoradd test mode wall: $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}") s"
fi

if want profile; then
  start=$(date +%s.%N)
  $PY -m pytest submissions/vectoradd/example/submission.py -p no:cacheprovider -rfEs \
    --kb-mode profile --kb-results "$OUT/profile.json" 2>&1 | tee "$OUT/profile.log" | tail -15
  note "vectoradd profile mode: $(tail -1 "$OUT/profile.log"); wall $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}") s"
  NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
  report=$(ls "$OUT"/profile.profiles/*.ncu-rep 2>/dev/null | head -1)
  if [[ -n $report ]]; then  # the raw page our parser reads, kept as a test fixture
    ${NCU:-ncu} --import "$report" --csv --page raw > "$OUT/ncu_raw.csv" 2>&1
    rm -f "$OUT"/profile.profiles/*.ncu-rep  # large; the summary is in profile.json
  fi
fi

if want accuracy; then
  $PY benchmarks/timing_accuracy.py --runs 5 --out "$OUT" 2>&1 | tee "$OUT/accuracy.log" | tail -20
fi

echo
echo "==== summary ($parts) ===="
printf '%s\n' "${summary[@]}"
