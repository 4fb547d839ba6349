"""KernelBench's own evaluator on N candidates of one problem, as its batch script runs them:
the rate to compare `kernelboard judge` with (docs/benchmarks.md, "Batch judging").

    python benchmarks/kernelbench_evaluator.py KERNELBENCH PROBLEM.py [--candidates 40]
        [--gpus 1] [--json OUT]

KERNELBENCH is a checkout of ScalingIntelligence/KernelBench (its `src/` is imported);
PROBLEM.py one of its problem files (KERNELBENCH/KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py).
Each candidate is the problem's own source with `ModelNew = Model` and a comment of its own
(distinct files, identical code), as `benchmarks/batch_throughput.py --kernelbench-problem`
makes them. They are evaluated the way KernelBench's scripts/eval_from_generations.py does
locally: in batches of one candidate per GPU, each batch in a fresh `spawn` pool (a new Python
process per candidate, which imports torch), each candidate by `eval_kernel_against_ref` with
that script's settings (5 correctness trials, 100 timed trials with CUDA events, the reference
timed in the same call). After each batch it prints the candidates' seconds and the peak device
memory so far (a run cut short still says how far it got); at the end the wall time, candidates
per hour, how many were correct, the median runtime and reference runtime, and the peak device
memory in use (NVML, every 50 ms: sweep_lane.MemoryPeaks) on the busiest GPU it used
(CUDA_VISIBLE_DEVICES applies).

KernelBench's package imports its LLM clients (openai, litellm) and python-dotenv (for their
API keys) at import time; where they are not installed they are replaced by empty modules,
since no LLM is called. Its other imports (numpy, pydantic, requests, tqdm) must be installed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep_lane import MemoryPeaks, nvml_numbers  # noqa: E402


def _load_no_dotenv(*args: object, **kwargs: object) -> bool:
    return False  # python-dotenv's answer when there is no .env file to read


def _stub_llm_clients() -> None:
    """Empty stand-ins for the LLM client packages KernelBench imports but never calls here,
    and for the package that reads their keys."""
    import importlib.util

    stubs = (
        ("openai", {"OpenAI": None}),
        ("litellm", {"completion": None}),
        ("dotenv", {"load_dotenv": _load_no_dotenv}),
    )
    for name, attrs in stubs:
        if importlib.util.find_spec(name) is None:
            module = types.ModuleType(name)
            for attr, value in attrs.items():
                setattr(module, attr, value)
            sys.modules[name] = module


def evaluate(source_root: str, reference: str, candidate: str, device: int, build: str) -> dict:
    """One candidate in this (spawned) process, as eval_from_generations' evaluate_single_sample."""
    sys.path.insert(0, source_root)
    _stub_llm_clients()
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    started = time.perf_counter()
    try:
        result = eval_kernel_against_ref(
            original_model_src=reference,
            custom_model_src=candidate,
            measure_performance=True,
            timing_method="cuda_event",
            num_correct_trials=5,
            num_perf_trials=100,
            build_dir=build,
            device=torch.device(f"cuda:{device}"),
            backend="cuda",
            precision=torch.float32,
        )
    except Exception as exc:  # the script's own last-level catch
        return {"error": repr(exc), "seconds": time.perf_counter() - started}
    return {
        "compiled": result.compiled,
        "correctness": result.correctness,
        "runtime_us": result.runtime,
        "ref_runtime_us": result.ref_runtime,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernelbench", type=Path, help="a checkout of KernelBench")
    parser.add_argument("problem", type=Path, help="one of its problem files")
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the summary here too")
    args = parser.parse_args()

    source_root = str((args.kernelbench / "src").resolve())
    reference = args.problem.read_text()
    candidates = [
        f"{reference}\n\n# candidate {i}: the reference's own model\nModelNew = Model\n"
        for i in range(args.candidates)
    ]
    memory = MemoryPeaks()
    gpus = nvml_numbers(list(range(args.gpus)))  # the GPUs its candidates run on
    memory.begin(gpus)
    results: list[dict] = []
    started = time.perf_counter()
    context = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as builds:
        for first in range(0, len(candidates), args.gpus):
            batch = candidates[first : first + args.gpus]
            with context.Pool(len(batch)) as pool:
                pending = [
                    pool.apply_async(
                        evaluate,
                        (source_root, reference, source, gpu, f"{builds}/{first + gpu}"),
                    )
                    for gpu, source in enumerate(batch)
                ]
                results.extend(p.get(timeout=600) for p in pending)
            seconds = ", ".join(f"{r['seconds']:.1f}" for r in results[first:])
            peak_so_far = memory.peak_so_far(gpus)
            print(
                f"{len(results)}/{len(candidates)} evaluated at {time.perf_counter() - started:.1f} s"
                f" (this batch: {seconds} s a candidate"
                + (f"; peak so far {peak_so_far / 1e9:.2f} GB" if peak_so_far is not None else "")
                + ")",
                file=sys.stderr,
                flush=True,
            )
    wall_s = time.perf_counter() - started
    peak = memory.end(gpus)

    correct = [r for r in results if r.get("correctness")]
    summary = {
        "problem": args.problem.name,
        "candidates": len(candidates),
        "gpus": args.gpus,
        "wall_s": round(wall_s, 1),
        "candidates_per_hour": round(len(candidates) / wall_s * 3600),
        "correct": len(correct),
        "errors": [r["error"] for r in results if "error" in r][:3],
        "median_runtime_us": statistics.median(r["runtime_us"] for r in correct)
        if correct
        else None,
        "median_ref_runtime_us": (
            statistics.median(r["ref_runtime_us"] for r in correct) if correct else None
        ),
        "median_candidate_s": round(statistics.median(r["seconds"] for r in results), 2),
        "peak_device_gb": round(peak / 1e9, 2) if peak is not None else None,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
