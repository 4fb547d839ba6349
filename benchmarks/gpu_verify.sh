#!/usr/bin/env bash
# One verification pass on a GPU machine; prints a short table at the end.
#
#   bash benchmarks/gpu_verify.sh [tests] [selfcheck] [truth] [sandbox] [profile] [accuracy]
#
# tests      the GPU test files, one pytest each (a slow file cannot hide the others' verdicts)
# selfcheck  `pytest leaderboards -n 8` on the one GPU: every bundled solution, under load
# truth      benchmarks/timing_truth.py: ranking statistic vs ncu, score spread, identical-code
#            speedup, wall times (with 16 host-spinning processes for a busy host)
# sandbox    benchmarks/sandbox_cost.py: worker start-up and per-call cost with and without it
# profile    the vectoradd example in profile mode (ncu where present)
# accuracy   benchmarks/timing_accuracy.py: copies and a matmul against ncu and do_bench
# With no stage named: tests selfcheck truth sandbox.
# Logs go to $OUT (default ./gpu-verify) as one file per stage. GPU_TEST_FILES picks test files;
# TEST_LIMIT and TRUTH_LIMIT bound a test file's and the timing truth's seconds.
set -u
OUT=${OUT:-$PWD/gpu-verify}
mkdir -p "$OUT"
stages=${*:-tests selfcheck truth sandbox}
table=()
ALL_GPU_TESTS="tests/test_window_gpu.py tests/test_sandbox_gpu.py tests/test_gpu_timing.py
    tests/test_gpu_reference_runs.py tests/test_cuda_source_gpu.py tests/test_hostile.py
    tests/test_profiling.py tests/test_gpumode_compat.py"

run_stage() {  # name, limit in seconds, command...
    local name=$1 limit=$2
    shift 2
    local started=$SECONDS
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E "passed|failed|error" "$OUT/$name.log" | tail -1 | cut -c1-90)
    table+=("$(printf '%-34s rc=%-3s %4ss  %s' "$3" "$rc" $((SECONDS - started)) "$last")")
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv,noheader
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"

for stage in $stages; do
    case $stage in
    tests)
        for file in ${GPU_TEST_FILES:-$ALL_GPU_TESTS}; do
            echo "==== $file" >>"$OUT/tests.log"
            run_stage tests "${TEST_LIMIT:-300}" python -m pytest "$file" -q -rfEs -p no:cacheprovider
        done
        ;;
    selfcheck)
        run_stage selfcheck 420 python -m pytest leaderboards -n 8 -q -rfE -p no:cacheprovider
        ;;
    truth)
        run_stage truth "${TRUTH_LIMIT:-560}" python benchmarks/timing_truth.py --runs 5 --noisy 16 --out "$OUT"
        tail -40 "$OUT/truth.log"
        ;;
    sandbox)
        run_stage sandbox 200 python benchmarks/sandbox_cost.py
        tail -15 "$OUT/sandbox.log"
        ;;
    profile)
        run_stage profile 300 python -m pytest submissions/vectoradd/example/submission.py \
            -p no:cacheprovider -rfEs --kb-mode profile --kb-results "$OUT/profile.json"
        ;;
    accuracy)
        run_stage accuracy 560 python benchmarks/timing_accuracy.py --runs 5 --out "$OUT"
        tail -20 "$OUT/accuracy.log"
        ;;
    esac
done

echo
echo "== gpu_verify: $stages =="
printf '%s\n' "${table[@]}"
