#!/usr/bin/env bash
# One verification pass on a GPU machine; prints a short table at the end.
#
#   bash benchmarks/gpu_verify.sh [tests] [loadtests] [selfcheck] [truth] [sandbox] [startup] [profile]
#                                 [accuracy]
#
# tests      the GPU test files, one pytest each (a slow file cannot hide the others' verdicts)
# loadtests  the same GPU test files in one pytest with -n ${LOAD_WORKERS:-4}: they share the GPU
# selfcheck  `pytest leaderboards -n ${SELFCHECK_WORKERS:-8}`: every bundled solution, under load
#            (on a host of N GPUs, SELFCHECK_WORKERS=N: one GPU per xdist worker, the multi-GPU
#            cases leasing whole sets), SELFCHECK_RUNS times in a row (default 1)
# truth      benchmarks/timing_truth.py: ranking statistic vs ncu, score spread, identical-code
#            speedup, wall times (with 16 host-spinning processes for a busy host)
# sandbox    benchmarks/sandbox_cost.py: worker start-up and per-call cost with and without it
# startup    cProfile of one sandboxed test-mode run of the vectoradd example: where it waits
# roundtrip  cProfile of the judge over the vectoradd example's 8192² benchmark case (plain
#            path): where a timed call's round trip to the worker goes (on the H100 it was once
#            206 ms a call for a 125 µs kernel, its output crossing as host copies; 3 ms since)
# profile    the vectoradd example in profile mode (ncu where present)
# accuracy   benchmarks/timing_accuracy.py: copies and a matmul against ncu and do_bench
# memory     benchmarks/memory_peak.py on the seven KernelBench-sized problems (peak against
#            2x(inputs+outputs)+working+2 GiB, who held what at the peak, a timeline)
# shared     the four 20-30 GB leaderboards judged together under -n 4 on the one GPU
# ranked     benchmarks/ranked_runs.sh: leaderboard-mode runs of the bundled solutions, for results/
# hacks      tests/test_batch_hacks.py: every reward hack's verdict, the GPU-only ones included
# hostbound  tests/test_gpumode_vectoradd_gpu.py -s: the GPU MODE-shaped vectoradd_py in
#            leaderboard mode (wall time and each timing's stop), then the bundled vectoradd,
#            grayscale and histogram in leaderboard mode, each timed
# hostprof   cProfile of the GPU MODE-shaped vectoradd_py fixture in leaderboard mode with the
#            reference timed in the run: where its wall time goes, and each timing's wall
# batch      benchmarks/batch_throughput.py on the 100-candidate batch in benchmark mode
#            (BATCH_RUNS times, default 1)
# baseline   benchmarks/batch_against_baseline.py: the same batch judged by an older tree's judge
#            (BASELINE_TREE, e.g. `git archive 56b6378 | tar -x -C DIR`) and this one in turns
#            (BASELINE_ORDER, default c,b,c,b,c): this judge's rate over that one's on this host
# scaling    benchmarks/batch_throughput.py on SCALING_CANDIDATES (default 40) copies of
#            KernelBench L2 12 (KERNELBENCH: a checkout's KernelBench/ folder) on one GPU, then
#            on every GPU (SCALING_GPUS: the GPU sets, e.g. "0 0,1 0,1,2,3"): the rate each adds
# inline     benchmarks/batch_throughput.py --load-inline: 20 cold load_inline builds
# noise      benchmarks/probes/process_noise.py: a host-bound call's host time from process to
#            process, two live processes taking turns, and each call on the next CPU
# gaps       benchmarks/probes/process_noise.py --gaps: a blocked call's host time after a sleep,
#            a busy wait, a memory touch or a warm call, per process (what cools a judged call's
#            host path)
# placement  benchmarks/probes/placement_probe.py: a 16384² add's time by where its buffers lie
#            and by how long the GPU idled before it
# pages      benchmarks/probes/placement_probe.py --pages: the same add on VMM mappings by
#            alignment (the page size the GPU's MMU can use for them)
# scrub      benchmarks/probes/scrub_probe.py: a large add's time right after memory was freed
#            (the driver's scrubbing), then the 16384² vectoradd case judged with and without
#            the wait for it (SCRUB_JUDGED times each)
# serve      benchmarks/serve_vs_judge.py on the same batch: HTTP against kernelboard judge
#            (SERVE_JOBS: jobs posted to each server; the later ones find its judges warm)
# multigpu   the multi-GPU layout and GPU tests, allreduce_scale in every mode (2+ GPUs)
# shmwatch   which multi-GPU test leaves the judge's torch_shm_manager gone (probes/shm_watch.py)
# gpumodedist benchmarks/gpumode_distributed.py: GPU MODE's amd_distributed problems, unmodified,
#            at world_size 2 and 4 (GPUMODE_PROBLEMS: a reference-kernels checkout's problems/)
# With no stage named: tests selfcheck truth sandbox.
# Logs go to $OUT (default ./gpu-verify) as one file per stage. GPU_TEST_FILES picks test files
# and GPU_TEST_ARGS adds pytest arguments to each (-k timer_patch_gpu);
# TEST_LIMIT and TRUTH_LIMIT bound a test file's and the timing truth's seconds; TRUTH_PARTS
# picks the timing truth's parts (accuracy,cost,linalg), in order; TRUTH_NOISY its host spinners.
set -u
OUT=${OUT:-$PWD/gpu-verify}
mkdir -p "$OUT"
stages=${*:-tests selfcheck truth sandbox}
table=()
ALL_GPU_TESTS="tests/test_window_gpu.py tests/test_sandbox_gpu.py tests/test_gpu_timing.py
    tests/test_gpu_reference_runs.py tests/test_cuda_source_gpu.py tests/test_hostile.py
    tests/test_profiling.py tests/test_gpumode_compat.py tests/test_wake_gpu.py tests/test_warm_gpu.py
    tests/test_cpu_choice.py tests/test_scrub_gpu.py tests/test_cuda_compute_gpu.py
    tests/test_header_library.py tests/test_timing_core.py tests/test_paired_turns.py
    tests/test_seeding.py tests/test_zygote_prestart.py"

run_stage() {  # name, limit in seconds, command...
    local name=$1 limit=$2
    shift 2
    local started=$SECONDS
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    local rc=$?
    local last
    last=$(grep -E "passed|failed|error" "$OUT/$name.log" | tail -1 | cut -c1-90)
    table+=("$(printf '%-10s %-34s rc=%-3s %4ss  %s' "$name" "${label:-}" "$rc" \
        $((SECONDS - started)) "$last")")
}

print_profile() {  # a cProfile file, the log it goes to, how many of our own functions to list
    python -c "import pstats, sys; s = pstats.Stats(sys.argv[1])
s.sort_stats('cumulative').print_stats('pytest_kernelboard', int(sys.argv[2]))
s.sort_stats('tottime').print_stats(20)" "$1" "$3" >>"$2" 2>&1
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv,noheader
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"

for stage in $stages; do
    case $stage in
    tests)
        for file in ${GPU_TEST_FILES:-$ALL_GPU_TESTS}; do
            echo "==== $file" >>"$OUT/tests.log"
            # shellcheck disable=SC2086  # GPU_TEST_ARGS are words on purpose (-k EXPR, -x)
            label=$file run_stage tests "${TEST_LIMIT:-300}" python -m pytest "$file" -q -rfEs \
                -p no:cacheprovider ${GPU_TEST_ARGS:-}
        done
        ;;
    loadtests)
        # shellcheck disable=SC2086  # the list is words on purpose
        label="-n ${LOAD_WORKERS:-4}" run_stage loadtests "${TEST_LIMIT:-420}" python -m pytest \
            ${GPU_TEST_FILES:-$ALL_GPU_TESTS} -n "${LOAD_WORKERS:-4}" -q -rfEs -p no:cacheprovider
        ;;
    multigpu)
        # The multi-GPU cases on every visible GPU (2 or more), sandboxed: the layout tests,
        # the GPU tests (NCCL's transport, CUDA IPC between ranks), then allreduce_scale's
        # self-check and its solutions in each mode, correct and wrong.
        label="tests" run_stage multigpu "${TEST_LIMIT:-420}" python -m pytest \
            tests/test_case_sandbox.py tests/test_distributed_gpu.py tests/test_distributed.py \
            -q -rfEs -p no:cacheprovider -s
        label="selfcheck" run_stage multigpu 300 python -m pytest leaderboards/allreduce_scale \
            -q -rfEs -p no:cacheprovider
        for mode in benchmark leaderboard; do
            for solution in correct/submission_pytorch.py wrong/submission_rank0_only.py; do
                label="$mode $solution" run_stage multigpu 300 python -m pytest \
                    "leaderboards/allreduce_scale/solutions/$solution" \
                    --kb-leaderboard allreduce_scale --kb-mode "$mode" -q -rfEs \
                    -p no:cacheprovider --kb-results "$OUT/allreduce-$mode-${solution%%/*}.json"
            done
        done
        ;;
    shmwatch)
        # The GPU multi-rank tests, then the gloo ones, in one judge process: after each test,
        # whether the judge's torch_shm_manager still runs.
        PYTHONPATH=benchmarks/probes run_stage shmwatch 300 python -m pytest -p shm_watch -s \
            -q -rfE -p no:cacheprovider tests/test_distributed_gpu.py tests/test_distributed.py
        grep -E "shm-watch|passed|failed" "$OUT/shmwatch.log" | tail -40
        ;;
    gpumodedist)
        # GPU MODE's distributed problems (a reference-kernels checkout's problems/ in
        # GPUMODE_PROBLEMS), imported unmodified, at world_size 2 and 4 where the GPUs allow.
        run_stage gpumodedist "${GPUMODE_LIMIT:-580}" python benchmarks/gpumode_distributed.py \
            "${GPUMODE_PROBLEMS:-.refk/problems}" --world-sizes "${GPUMODE_WORLD_SIZES:-2,4}" \
            --modes "${GPUMODE_MODES:-test,leaderboard}" --out "$OUT/gpumode-distributed"
        tail -60 "$OUT/gpumodedist.log"
        ;;
    selfcheck)
        for run in $(seq "${SELFCHECK_RUNS:-1}"); do
            label="run $run" run_stage selfcheck 420 python -m pytest leaderboards \
                -n "${SELFCHECK_WORKERS:-8}" -q -rfE -p no:cacheprovider
        done
        ;;
    scaling)
        problem="${KERNELBENCH:-.kbsrc/KernelBench}/level2/12_Gemm_Multiply_LeakyReLU.py"
        all=$(python -c "import torch; print(','.join(map(str, range(torch.cuda.device_count()))))")
        # shellcheck disable=SC2086  # SCALING_GPUS is a list of GPU sets on purpose
        for gpus in ${SCALING_GPUS:-0 $all}; do
            label="GPUs $gpus" run_stage scaling 300 python benchmarks/batch_throughput.py \
                --kernelbench-problem "$problem" --candidates "${SCALING_CANDIDATES:-40}" \
                --mode benchmark --gpus "$gpus" --runs 1 --out "$OUT/scaling-${gpus//,/_}"
        done
        grep -E "records in|candidates/h|^1 " "$OUT/scaling.log"
        ;;
    truth)
        run_stage truth "${TRUTH_LIMIT:-560}" python benchmarks/timing_truth.py --runs 5 --noisy "${TRUTH_NOISY:-16}" \
            --parts "${TRUTH_PARTS:-accuracy,cost,linalg}" --out "$OUT"
        tail -40 "$OUT/truth.log"
        ;;
    sandbox)
        run_stage sandbox 200 python benchmarks/sandbox_cost.py
        tail -15 "$OUT/sandbox.log"
        ;;
    startup)
        run_stage startup 120 python -m cProfile -o "$OUT/test_mode.prof" -m pytest \
            submissions/vectoradd/example/submission.py -q -p no:cacheprovider --kb-mode test
        print_profile "$OUT/test_mode.prof" "$OUT/startup.log" 40
        ;;
    roundtrip)
        run_stage roundtrip 200 python -m cProfile -o "$OUT/roundtrip.prof" -m pytest \
            submissions/vectoradd/example/submission.py -q -p no:cacheprovider \
            --kb-mode benchmark -k "benchmark and 8192" --kb-results "$OUT/roundtrip.json"
        print_profile "$OUT/roundtrip.prof" "$OUT/roundtrip.log" 50
        python -c "import json, sys
for e in json.load(open(sys.argv[1]))['evaluations']:
    for c in e['cases']:
        t = c.get('timing') or {}
        if t: print(e['submission'].get('author'), c['id'], 'n', t['n'], 'host_copied_calls',
                    t.get('host_copied_calls'), 'wall_s', t.get('wall_s'))" "$OUT/roundtrip.json" \
            | tee -a "$OUT/roundtrip.log"
        ;;
    profile)
        run_stage profile 300 python -m pytest submissions/vectoradd/example/submission.py \
            -p no:cacheprovider -rfEs --kb-mode profile --kb-results "$OUT/profile.json"
        ;;
    accuracy)
        run_stage accuracy 560 python benchmarks/timing_accuracy.py --runs 5 --out "$OUT"
        tail -20 "$OUT/accuracy.log"
        ;;
    memory)
        run_stage memory "${MEMORY_LIMIT:-420}" python benchmarks/memory_peak.py \
            --json "$OUT/memory.json"
        tail -14 "$OUT/memory.log"
        ;;
    shared)
        label="four leaderboards, -n 4" run_stage shared "${MEMORY_LIMIT:-420}" python -m pytest \
            tests/test_memory_gpu.py -k four -q -rfEs -p no:cacheprovider
        ;;
    hacks)
        run_stage hacks "${TEST_LIMIT:-300}" python -m pytest tests/test_batch_hacks.py -q -rfEs \
            -p no:cacheprovider
        ;;
    hostbound)
        label=vectoradd_py run_stage hostbound 300 python -m pytest \
            tests/test_gpumode_vectoradd_gpu.py -s -q -rfEs -p no:cacheprovider
        for board in vectoradd grayscale histogram; do
            label=$board run_stage hostbound 300 python -m pytest "submissions/$board" -q \
                -p no:cacheprovider --kb-mode leaderboard --kb-remeasure-reference \
                --kb-results "$OUT/hostbound-$board.json"
        done
        ;;
    hostprof)
        scratch=$(mktemp -d)
        cp -r tests/fixtures/gpumode_vectoradd/. "$scratch"
        printf '[pytest]\naddopts = -p no:cacheprovider\n' >"$scratch/pytest.ini"
        pushd "$scratch" >/dev/null || exit 1
        label=vectoradd_py run_stage hostprof 200 python -m cProfile -o "$OUT/hostprof.prof" \
            -m pytest -q --kb-mode leaderboard --kb-remeasure-reference \
            --kb-results "$OUT/hostprof.json" submissions/vectoradd_py/gm/submission.py
        popd >/dev/null || exit 1
        print_profile "$OUT/hostprof.prof" "$OUT/hostprof.log" 45
        python -c "import json, sys
for e in json.load(open(sys.argv[1]))['evaluations']:
    for c in e['cases']:
        for key in ('timing', 'reference_timing'):
            t = c.get(key) or {}
            print(c['id'], key, 'n', t.get('n'), 'us', t.get('rank_us'), t.get('flags'),
                  t.get('stop_reason'), 'warm', t.get('warm_calls'), 'elapsed', t.get('elapsed_s'),
                  t.get('wall_s'))" \
            "$OUT/hostprof.json" 2>&1 | tee -a "$OUT/hostprof.log"
        ;;
    batch)
        run_stage batch "${BATCH_LIMIT:-560}" python benchmarks/batch_throughput.py \
            --mode benchmark --runs "${BATCH_RUNS:-1}" --out "$OUT/batch"
        tail -40 "$OUT/batch.log"
        ;;
    baseline)
        if [ -z "${BASELINE_TREE:-}" ]; then
            echo "baseline: set BASELINE_TREE to a checkout of the older commit" | tee "$OUT/baseline.log"
        else
            run_stage baseline "${BASELINE_LIMIT:-560}" python benchmarks/batch_against_baseline.py \
                "$BASELINE_TREE" --order "${BASELINE_ORDER:-c,b,c,b,c}" --out "$OUT/baseline"
            tail -20 "$OUT/baseline.log"
        fi
        ;;
    noise)
        run_stage noise 300 python benchmarks/probes/process_noise.py --processes 6 --cpus 2
        run_stage noise 200 python benchmarks/probes/process_noise.py --processes 6 --cpus -2
        run_stage noise 200 python benchmarks/probes/process_noise.py --ring 8 --calls 300
        cat "$OUT/noise.log"
        ;;
    gaps)
        run_stage gaps 200 python benchmarks/probes/process_noise.py --gaps "${GAP_MS:-3}" \
            --processes 6 --calls 100
        cat "$OUT/gaps.log"
        ;;
    placement)
        run_stage placement 200 python benchmarks/probes/placement_probe.py --gaps --sets 3
        run_stage placement 200 python benchmarks/probes/placement_probe.py --gaps --sets 1 \
            --gap-ms 2
        run_stage placement 200 python benchmarks/probes/placement_probe.py --sets 2
        cat "$OUT/placement.log"
        ;;
    pages)
        run_stage pages 200 python benchmarks/probes/placement_probe.py --pages \
            --sets "${PAGE_SETS:-3}" --calls "${PAGE_CALLS:-15}" ${PAGE_ARGS:-}
        cat "$OUT/pages.log"
        ;;
    scrub)
        run_stage scrub 200 python benchmarks/probes/scrub_probe.py --reps 6
        run_stage scrub 300 python benchmarks/probes/scrub_probe.py --judged "${SCRUB_JUDGED:-4}"
        cat "$OUT/scrub.log"
        ;;
    inline)
        run_stage inline "${BATCH_LIMIT:-560}" python benchmarks/batch_throughput.py \
            --load-inline --runs 1 --out "$OUT/inline"
        tail -20 "$OUT/inline.log"
        ;;
    serve)
        scratch=$(mktemp -d)
        python benchmarks/batch_candidates.py "$scratch" --repo "$scratch/repo" >/dev/null
        run_stage serve "${BATCH_LIMIT:-560}" python benchmarks/serve_vs_judge.py \
            kernelbench_l2_1_gemm_scale_leakyrelu_clamp "$scratch/batch.jsonl" --mode benchmark \
            --root "$scratch/repo" --repeats "${SERVE_REPEATS:-1}" --jobs "${SERVE_JOBS:-1}" \
            --keep "$OUT/serve"
        tail -20 "$OUT/serve.log"
        ;;
    ranked)
        run_stage ranked "${RANKED_LIMIT:-560}" bash benchmarks/ranked_runs.sh "$OUT/ranked" \
            ${RANKED_LEADERBOARDS:-}
        cat "$OUT/ranked.log"
        ;;
    esac
done

echo
echo "== gpu_verify: $stages =="
printf '%s\n' "${table[@]}"
