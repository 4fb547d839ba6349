"""The batch judge's acceptance batch: 100 candidates for one KernelBench-sized problem.

    python benchmarks/batch_candidates.py OUT [--repo DIR] [--load-inline] [--salt S]

Writes `OUT/batch.jsonl` (one `{id, source, lang}` per line, for `kernelboard judge`) and
`OUT/batch.expected.json` (the verdict each candidate must get); `--load-inline` also writes
`OUT/load_inline.jsonl` and its expectations: 20 candidates that build a torch extension at
import, every source new (`--salt`, random by default), so each build starts with a cold cache.
`--repo DIR` makes a repository that holds the problem's leaderboard, imported the way a user
does (`kernelboard import kernelbench`), with short timeouts written into its task.yml.

The problem (tests/fixtures/batch/kernelbench/level2/) is a GEMM with a scale, a leaky ReLU
and a clamp at KernelBench's level-2 sizes (128 x 1024 -> 512, fp32). The batch mixes PyTorch
and Triton: correct and slower (extra work), correct and faster (fused Triton kernels), wrong,
crashing, hanging, failing to build or import, and every reward hack of
tests/fixtures/batch/hacks/ (each file's first line is its expectation).

An expectation is `{status, error_kind?, flags?, faster?}`:
- status: the verdict, or a list of acceptable verdicts ("timed in full, or fails");
- error_kind: checked when given (null: none);
- flags: the record's flags exactly; `only_library_kernels` is expected in benchmark mode on
  a GPU only, and only of a candidate that passed;
- faster: in benchmark mode, on a GPU, of a candidate that passed: true means speedup > 1 and
  not tied with the reference; false means not that; absent or null: not checked (a
  prediction the H100 has not confirmed). `faster_cpu` is the same on a CPU;
- `cpu`, `test`, `benchmark`: keys that replace the ones above on a CPU or in that mode (a
  `cpu` key may hold `test` or `benchmark` keys of its own: on a CPU in that mode); status and
  error_kind may be lists of what is acceptable;
- `note`: why an expectation is what it is, for the reader of a mismatch.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "batch"
PROBLEMS = FIXTURE / "kernelbench"
HACKS = FIXTURE / "hacks"
LEVEL = 2
LEADERBOARD = "kernelbench_l2_1_gemm_scale_leakyrelu_clamp"
FOLDER = Path("leaderboards") / "kernelbench" / "l2_1_gemm_scale_leakyrelu_clamp"
# A hanging candidate costs test_timeout; a timed case at most its budget, derived from
# benchmark_timeout (stats/stopping.budget_for_case: 2 s here); builds keep their own budget,
# enough for a cold torch extension build on a busy host.
TIMEOUTS = {"test_timeout": 10, "benchmark_timeout": 20, "compile_timeout": 300}
BATCH_SIZE = 100
ONLY_LIBRARY = "only_library_kernels"  # a GPU benchmark-mode flag: PyTorch's kernels only
LOAD_INLINE_SIZE = 20


@dataclass(frozen=True)
class Spec:
    """One candidate and the verdict it must get."""

    id: str
    source: str
    expect: dict[str, Any] = field(default_factory=dict)
    lang: str = "py"

    def line(self) -> str:
        return json.dumps({"id": self.id, "source": self.source, "lang": self.lang})


def clean(source: str) -> str:
    return textwrap.dedent(source).lstrip("\n")


# -- the shared pieces of the generated sources ----------------------------------------------
MODEL_INIT = """
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale, slope, bound):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # first: the reference's weights
        self.scale, self.slope, self.bound = scale, slope, bound
"""

# custom_kernel(data): the weights the reference's Model gets (seed, then construct).
WEIGHTS = """
_layers = {}


def _weights(data, device):
    in_features, out_features = data["init_inputs"][:2]
    key = (data["weights"], in_features, out_features, str(device))
    if key not in _layers:
        torch.manual_seed(data["weights"])
        with torch.device(device):  # drawn where the reference's model draws them
            layer = nn.Linear(in_features, out_features)
        _layers[key] = (layer.weight.detach().contiguous(), layer.bias.detach().contiguous())
    return _layers[key]
"""


STANDARD_IMPORTS = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def indented(code: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(code).strip() + "\n", " " * spaces)


def torch_model(doc: str, body: str, imports: str = "", init: str = "") -> str:
    """A ModelNew whose forward is `body` (self.linear, self.scale, ... at hand); `imports`
    (any module-level code) goes after the standard imports, `init` at the end of __init__."""
    source = f'"""{doc}"""\n' + STANDARD_IMPORTS + (imports.strip() + "\n" if imports else "")
    source += "\n" + MODEL_INIT + (indented(init, 8) if init.strip() else "")
    return source + "\n    def forward(self, x):\n" + indented(body, 8)


def torch_kernel(doc: str, body: str) -> str:
    """A custom_kernel(data) with x, weight, bias, scale, slope, bound at hand."""
    return (
        f'"""{doc}"""\n'
        + STANDARD_IMPORTS
        + WEIGHTS
        + "\n\ndef custom_kernel(data):\n"
        + '    (x,) = data["inputs"]\n'
        + '    scale, slope, bound = data["init_inputs"][2:]\n'
        + "    weight, bias = _weights(data, x.device)\n"
        + "    with torch.no_grad():\n"
        + indented(body, 8)
    )


EPILOGUE = "F.leaky_relu(y * self.scale, self.slope).clamp(-self.bound, self.bound)"

# -- correct and slower ------------------------------------------------------------------------
SLOWER: dict[str, tuple[str, str]] = {
    "twice": (
        "Computes the layer twice and averages, 'for stability'.",
        f"y = (self.linear(x) + self.linear(x)) / 2\nreturn {EPILOGUE}",
    ),
    "chunks4": (
        "Row chunks of 4, one GEMM each.",
        "return torch.cat([self._one(c) for c in x.split(4)])",
    ),
    "chunks8": (
        "Row chunks of 8, one GEMM each.",
        "return torch.cat([self._one(c) for c in x.split(8)])",
    ),
    "chunks16": (
        "Row chunks of 16, one GEMM each.",
        "return torch.cat([self._one(c) for c in x.split(16)])",
    ),
    "rows": (
        "One matrix-vector product per row.",
        "return torch.stack([self._one(row) for row in x])",
    ),
    "float64": (
        "Computes in float64, then rounds back.",
        "y = F.linear(x.double(), self.linear.weight.double(), self.linear.bias.double())\n"
        "y = F.leaky_relu(y * self.scale, self.slope).clamp(-self.bound, self.bound)\n"
        "return y.float()",
    ),
    "separate_ops": (
        "Every step its own operator.",
        "y = x @ self.linear.weight.t()\ny = y + self.linear.bias\ny = y * self.scale\n"
        "y = torch.where(y >= 0, y, y * self.slope)\n"
        "return torch.clamp_max(torch.clamp_min(y, -self.bound), self.bound)",
    ),
    "relu_pair": (
        "The leaky ReLU as relu(y) - slope * relu(-y).",
        "y = self.linear(x) * self.scale\ny = F.relu(y) - self.slope * F.relu(-y)\n"
        "return y.clamp(-self.bound, self.bound)",
    ),
    "transposed": (
        "The GEMM as (W x^T)^T, made contiguous again.",
        f"y = (self.linear.weight @ x.t()).t().contiguous() + self.linear.bias\nreturn {EPILOGUE}",
    ),
    "split_k": (
        "The GEMM in four slices of K, summed.",
        "w = self.linear.weight\nparts = [xs @ ws.t() for xs, ws in zip(x.chunk(4, 1), w.chunk(4, 1))]\n"
        f"y = torch.stack(parts).sum(0) + self.linear.bias\nreturn {EPILOGUE}",
    ),
    "nan_guard": (
        "Checks its output for NaN before returning it (a host synchronisation).",
        f"y = self.linear(x)\ny = {EPILOGUE}\n"
        "if torch.isnan(y).any().item():\n    raise FloatingPointError('NaN in the output')\n"
        "return y",
    ),
    "einsum_clone": (
        "einsum, and a defensive copy of everything.",
        "y = torch.einsum('bk,nk->bn', x.clone(), self.linear.weight.clone())\n"
        f"y = y + self.linear.bias.clone()\nreturn ({EPILOGUE}).clone()",
    ),
}
ONE_ROW = f"\ndef _one(self, x):\n    y = self.linear(x)\n    return {EPILOGUE}\n"


def slower() -> Iterator[Spec]:
    for name, (doc, body) in SLOWER.items():
        source = torch_model(f"Correct and slower: {doc}", body)
        if "_one(" in body:
            source += textwrap.indent(ONE_ROW, "    ")
        expect = {"status": "passed", "flags": [ONLY_LIBRARY], "faster": False}
        yield Spec(f"slower-{name}", source, expect)


# -- correct, as fast as the reference (PyTorch's own kernels) ----------------------------------
SAME = {
    "addmm_inplace": (
        "addmm, then the epilogue in place.",
        "y = torch.addmm(self.linear.bias, x, self.linear.weight.t())\n"
        "return F.leaky_relu_(y.mul_(self.scale), self.slope).clamp_(-self.bound, self.bound)",
    ),
    "functional": (
        "F.linear and friends.",
        f"y = F.linear(x, self.linear.weight, self.linear.bias)\nreturn {EPILOGUE}",
    ),
    "folded_scale": (
        "The scale folded into the GEMM's alpha and beta.",
        "y = torch.addmm(self.linear.bias, x, self.linear.weight.t(), beta=self.scale, alpha=self.scale)\n"
        "return F.leaky_relu(y, self.slope).clamp(-self.bound, self.bound)",
    ),
}
SAME_KERNELS = {
    "kernel_functional": (
        "custom_kernel(data): the same operators.",
        "y = F.linear(x, weight, bias) * scale\nreturn F.leaky_relu(y, slope).clamp(-bound, bound)",
    ),
    "kernel_hardtanh": (
        "custom_kernel(data): the clamp as hardtanh.",
        "y = F.leaky_relu(F.linear(x, weight, bias) * scale, slope)\n"
        "return F.hardtanh(y, -bound, bound)",
    ),
}


def same_speed() -> Iterator[Spec]:
    expect = {"status": "passed", "flags": [ONLY_LIBRARY], "faster": False}
    # Three kernels where the reference launches four: it may well be faster.
    one_fewer = {**expect, "faster": None, "note": "the scale rides in the GEMM: one kernel fewer"}
    # The reference's kernels without its linear layer's module call (and, in place, three
    # allocations fewer): less host work a call, which a host-bound timing counts. On a 2-core
    # CPU machine at 1 x 4, a call read 26.2 µs through the modules, 23.3 and 25.2 µs for these
    # (medians of 40 interleaved rounds); on H200 hosts, in turns, 1.12 - 1.21x in some runs.
    one_module_fewer = {**expect, "faster": None, "note": "one module call fewer: less host work"}
    for name, (doc, body) in SAME.items():
        source = torch_model(f"Correct, PyTorch's own kernels: {doc}", body)
        want = one_fewer if name == "folded_scale" else one_module_fewer
        yield Spec(f"same-{name}", source, want)
    # The same kernels without the two module calls (the model's and its linear layer's): less
    # host work a call, which a host-bound timing counts. On a 2-core CPU machine, at 1 x 4 so
    # that the arithmetic is nothing, a call read 26.7 - 30.1 µs through the modules and
    # 14.3 - 15.5 µs without; on an H200, timed in turns with the reference, 1.20x and 1.22x.
    no_modules = {**expect, "faster": None, "note": "no module calls: less host work a call"}
    for name, (doc, body) in SAME_KERNELS.items():
        yield Spec(
            f"same-{name}", torch_kernel(f"Correct, PyTorch's own kernels: {doc}", body), no_modules
        )


# -- precision traded within KernelBench's tolerance (atol = rtol = 1e-2) ---------------------
PRECISION = {
    "fp16_linear": (
        "the GEMM in float16 with float32 output.",
        "y = F.linear(x.half(), self.w16, self.b16).float()\nreturn " + EPILOGUE,
        "self.w16 = None",
    ),
    "fp16_addmm": (
        "addmm in float16, the epilogue in float32.",
        "y = torch.addmm(self.b16, x.half(), self.w16.t()).float()\nreturn " + EPILOGUE,
        "self.w16 = None",
    ),
    "tf32_flag": (
        "TF32 tensor cores for float32 GEMMs, switched on at import.",
        f"y = self.linear(x)\nreturn {EPILOGUE}",
        "",
    ),
    "matmul_precision": (
        "torch.set_float32_matmul_precision('high') at import.",
        f"y = self.linear(x)\nreturn {EPILOGUE}",
        "",
    ),
}


def precision() -> Iterator[Spec]:
    # bfloat16 is left out: its 8-bit mantissa misses atol = rtol = 1e-2 on some elements at
    # K = 1024 (1 of 65,536 in a timed call on the CPU), a verdict that depends on the input.
    note = "fewer bits in the GEMM's inputs; faster on the H100 if the GEMM dominates"
    for name, (doc, body, init) in PRECISION.items():
        imports = ""
        if name == "tf32_flag":
            imports = "\ntorch.backends.cuda.matmul.allow_tf32 = True"
        elif name == "matmul_precision":
            imports = "\ntorch.set_float32_matmul_precision('high')"
        if init:  # the weights cast once, on the first call, on the device they live on
            body = (
                "if self.w16 is None or self.w16.device != x.device:\n"
                "    self.w16 = self.linear.weight.detach().half()\n"
                "    self.b16 = self.linear.bias.detach().half()\n" + body
            )
        source = torch_model(f"Correct: {doc}", body, imports=imports, init=init)
        yield Spec(
            f"precision-{name}",
            source,
            {"status": "passed", "flags": [ONLY_LIBRARY], "note": note},
        )


# -- Triton ----------------------------------------------------------------------------------
TRITON_FUSED = """
@triton.jit
def fused_linear_epilogue(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, scale, slope, bound,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + kk[:, None],
                    mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
@DOT@
@BIAS@
@LEAKY@
@CLAMP@
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


BLOCK_M, BLOCK_N, BLOCK_K = @BLOCKS@


def fused(x, weight, bias, scale, slope, bound):
    x = x.contiguous()
    (m, k), n = x.shape, weight.shape[0]
    y = torch.empty(m, n, device=x.device, dtype=torch.float32)
    grid = (@GRID_M@, triton.cdiv(n, BLOCK_N))
    fused_linear_epilogue[grid](
        x, weight, bias, y, m, n, k, scale, slope, bound,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=@WARPS@, num_stages=@STAGES@,
    )
    return y
"""
DOTS = {
    "fp16": "        acc += tl.dot(a.to(tl.float16), b.to(tl.float16))",
    "tf32": '        acc += tl.dot(a, b, input_precision="tf32")',
    "ieee": '        acc += tl.dot(a, b, input_precision="ieee")',
}
BIAS = "    y = (acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]) * scale"
LEAKY = "    y = tl.where(y >= 0, y, y * slope)"
CLAMP = "    y = tl.minimum(tl.maximum(y, -bound), bound)"
BUGS = {  # the line each bug replaces
    "slope": ("@LEAKY@", "    y = tl.where(y >= 0, y, y * slope * 2)"),
    "bias": ("@BIAS@", "    y = acc * scale"),
    "clamp": ("@CLAMP@", "    y = tl.maximum(y, -bound)"),
    "undefined": ("@LEAKY@", "    y = tl.where(y >= 0, y, y * negative_slope)"),
    "grid": ("@GRID_M@", "m // BLOCK_M"),
}


@dataclass(frozen=True)
class TritonFused:
    """A fused GEMM + scale + leaky ReLU + clamp kernel, or a deliberately broken one."""

    block_m: int
    block_n: int
    block_k: int
    warps: int = 4
    stages: int = 3
    inputs: str = "tf32"  # "tf32", "ieee" (float32 dot) or "fp16" (float16 inputs, float32 sums)
    form: str = "model"  # "model": ModelNew; "kernel": custom_kernel(data)
    bug: str = ""  # a key of BUGS, or none

    def source(self, doc: str) -> str:
        kernel = TRITON_FUSED
        if self.bug:
            placeholder, line = BUGS[self.bug]
            kernel = kernel.replace(placeholder, line)
        for placeholder, value in {
            "@DOT@": DOTS[self.inputs],
            "@BIAS@": BIAS,
            "@LEAKY@": LEAKY,
            "@CLAMP@": CLAMP,
            "@GRID_M@": "triton.cdiv(m, BLOCK_M)",
            "@BLOCKS@": f"{self.block_m}, {self.block_n}, {self.block_k}",
            "@WARPS@": str(self.warps),
            "@STAGES@": str(self.stages),
        }.items():
            kernel = kernel.replace(placeholder, value)
        head = f'"""{doc}"""\nimport torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n'
        if self.form == "kernel":
            tail = (
                WEIGHTS
                + "\n\ndef custom_kernel(data):\n"
                + '    (x,) = data["inputs"]\n'
                + '    scale, slope, bound = data["init_inputs"][2:]\n'
                + "    weight, bias = _weights(data, x.device)\n"
                + "    return fused(x, weight, bias, scale, slope, bound)\n"
            )
        else:
            tail = (
                MODEL_INIT
                + "\n    def forward(self, x):\n"
                + "        return fused(x, self.linear.weight, self.linear.bias, self.scale,"
                + " self.slope, self.bound)\n"
            )
        return head + kernel + "\n" + tail


FP16_CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
    (16, 32, 64, 2, 3),
    (32, 32, 64, 4, 3),
    (16, 64, 64, 4, 3),
    (32, 64, 32, 4, 4),
    (64, 32, 64, 4, 3),
    (64, 64, 32, 4, 3),
    (32, 128, 32, 4, 3),
    (16, 16, 128, 2, 3),
]
TF32_CONFIGS = [
    (16, 32, 32, 2, 3),
    (32, 32, 32, 4, 3),
    (16, 64, 32, 4, 3),
    (32, 64, 32, 4, 3),
    (64, 32, 32, 4, 3),
    (64, 64, 32, 4, 3),
    (32, 32, 64, 4, 2),
    (16, 128, 32, 4, 3),
]
IEEE_CONFIGS = [(32, 32, 32, 4, 3), (16, 64, 32, 4, 3), (64, 64, 16, 4, 3)]


# On a CPU, Triton runs in its interpreter: a fused 128 x 1024 -> 512 GEMM passes its
# correctness cases, but its timed case may outlast the batch's 20 s benchmark_timeout (11 of 11
# did on the 2-core CPU machine, their correctness checks at full size taking most of it).
INTERPRETED_GEMM = {"benchmark": {"status": ["passed", "error"], "error_kind": [None, "timeout"]}}


def triton_fused() -> Iterator[Spec]:
    for index, (bm, bn, bk, warps, stages) in enumerate(FP16_CONFIGS):
        kernel = TritonFused(bm, bn, bk, warps, stages, "fp16", "kernel" if index % 2 else "model")
        doc = f"Correct and faster: one fused Triton kernel, float16 inputs, {bm}x{bn}x{bk} tiles."
        yield Spec(
            f"triton-fp16-{bm}x{bn}x{bk}",
            kernel.source(doc),
            {
                "status": "passed",
                "faster": True,
                "faster_cpu": False,
                "note": "one kernel on tensor cores against cuBLAS's float32 GEMM and three more",
                "cpu": INTERPRETED_GEMM,
            },
        )
    for index, (bm, bn, bk, warps, stages) in enumerate(TF32_CONFIGS):
        kernel = TritonFused(bm, bn, bk, warps, stages, "tf32", "model" if index % 2 else "kernel")
        doc = f"Correct: one fused Triton kernel, TF32 tensor cores, {bm}x{bn}x{bk} tiles."
        yield Spec(
            f"triton-tf32-{bm}x{bn}x{bk}",
            kernel.source(doc),
            {
                "status": "passed",
                "faster_cpu": False,
                "note": "faster on the H100: unconfirmed",
                "cpu": INTERPRETED_GEMM,
            },
        )
    for bm, bn, bk, warps, stages in IEEE_CONFIGS:
        kernel = TritonFused(bm, bn, bk, warps, stages, "ieee")
        doc = f"Correct: one fused Triton kernel, float32 FMA, {bm}x{bn}x{bk} tiles."
        yield Spec(
            f"triton-ieee-{bm}x{bn}x{bk}",
            kernel.source(doc),
            {
                "status": "passed",
                "faster_cpu": False,
                "note": "faster on the H100: unconfirmed",
                "cpu": INTERPRETED_GEMM,
            },
        )


EPILOGUE_KERNEL = """
@triton.jit
def scale_leaky_clamp(y_ptr, n, scale, slope, bound, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(y_ptr + offs, mask=mask) * scale
    v = tl.where(v >= 0, v, v * slope)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(v, -bound), bound), mask=mask)
"""


def triton_epilogue() -> Iterator[Spec]:
    for block in (256, 512, 1024, 2048):
        body = (
            "y = torch.addmm(self.linear.bias, x, self.linear.weight.t())\n"
            f"scale_leaky_clamp[(triton.cdiv(y.numel(), {block}),)](\n"
            f"    y, y.numel(), self.scale, self.slope, self.bound, BLOCK={block})\n"
            "return y"
        )
        source = torch_model(
            f"Correct: cuBLAS's GEMM, then one Triton kernel for the epilogue ({block} a block).",
            body,
            imports="import triton\nimport triton.language as tl\n" + EPILOGUE_KERNEL,
        )
        yield Spec(
            f"triton-epilogue-{block}",
            source,
            {
                "status": "passed",
                "faster_cpu": False,
                "note": "two kernels against four: faster on the H100 if launches dominate",
            },
        )


# -- wrong -----------------------------------------------------------------------------------
WRONG = {
    "no_bias": "y = F.linear(x, self.linear.weight) * self.scale\nreturn F.leaky_relu(y, self.slope).clamp(-self.bound, self.bound)",
    "slope_doubled": "y = self.linear(x) * self.scale\nreturn F.leaky_relu(y, 2 * self.slope).clamp(-self.bound, self.bound)",
    "relu": "y = self.linear(x) * self.scale\nreturn F.relu(y).clamp(-self.bound, self.bound)",
    "no_clamp": "return F.leaky_relu(self.linear(x) * self.scale, self.slope)",
    "clamp_tight": "y = self.linear(x) * self.scale\nreturn F.leaky_relu(y, self.slope).clamp(-0.9 * self.bound, 0.9 * self.bound)",
    "scale_off": "y = self.linear(x) * (self.scale * 1.05)\nreturn F.leaky_relu(y, self.slope).clamp(-self.bound, self.bound)",
    "offset": f"y = self.linear(x)\nreturn {EPILOGUE} + 0.05",
    "last_row_zero": f"y = self.linear(x)\ny = {EPILOGUE}\ny[-1] = 0\nreturn y",
    "order_swapped": "y = F.leaky_relu(self.linear(x), self.slope).clamp(-self.bound, self.bound)\nreturn y * self.scale",
}
WRONG_SHAPE = {
    "transposed": (f"y = self.linear(x)\nreturn ({EPILOGUE}).t()", "incorrect_shape"),
    "in_a_list": (f"y = self.linear(x)\nreturn [{EPILOGUE}]", "incorrect_structure"),
}
OTHER_SEED = """
(x,) = data["inputs"]
in_features, out_features, scale, slope, bound = data["init_inputs"]
torch.manual_seed(0)  # not the reference's seed: other weights
layer = nn.Linear(in_features, out_features).to(x.device)
with torch.no_grad():
    return F.leaky_relu(layer(x) * scale, slope).clamp(-bound, bound)
"""


def wrong() -> Iterator[Spec]:
    failed = {"status": "failed", "error_kind": "incorrect_numerical"}
    for name, body in WRONG.items():
        yield Spec(f"wrong-{name}", torch_model(f"Wrong on purpose: {name}.", body), failed)
    for name, (body, kind) in WRONG_SHAPE.items():
        source = torch_model(f"Wrong on purpose: {name}.", body)
        yield Spec(f"wrong-{name}", source, {"status": "failed", "error_kind": kind})
    source = clean(
        '"""Wrong on purpose: weights from another seed."""\n'
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "def custom_kernel(data):\n" + textwrap.indent(OTHER_SEED.strip(), "    ") + "\n"
    )
    yield Spec("wrong-other_seed", source, failed)
    for bug, doc in (
        ("slope", "the negative slope doubled"),
        ("bias", "the bias left out"),
        ("grid", "a grid that rounds the rows down"),
        ("clamp", "the clamp's upper bound left out"),
    ):
        kernel = TritonFused(32, 32, 32, bug=bug)
        yield Spec(f"wrong-triton_{bug}", kernel.source(f"Wrong on purpose: {doc}."), failed)


# -- errors: crashes, hangs, builds, imports -------------------------------------------------
def crashes_and_errors() -> Iterator[Spec]:
    def model(doc: str, body: str, imports: str = "") -> str:
        return torch_model(doc, body, imports=imports)

    crashed = {"status": "error", "error_kind": "crashed"}
    yield Spec(
        "crash-os_exit", model("Exits the process mid-call.", "os._exit(3)", "import os"), crashed
    )
    yield Spec(
        "crash-segfault",
        model("Writes to address 0.", "ctypes.memset(0, 0, 8)", "import ctypes"),
        crashed,
    )
    yield Spec("crash-abort", model("Aborts.", "os.abort()", "import os"), crashed)
    yield Spec(
        "crash-sigkill",
        model("Kills itself.", "os.kill(os.getpid(), signal.SIGKILL)", "import os\nimport signal"),
        crashed,
    )
    yield Spec(
        "error-sys_exit",
        model("Calls sys.exit mid-call.", "sys.exit(2)", "import sys"),
        {"status": "error", "error_kind": "exit"},
    )
    yield Spec(
        "error-syntax",
        "import torch\n\n\ndef custom_kernel(data)\n    return data\n",
        {"status": "error", "error_kind": "compile_error"},
    )
    yield Spec(
        "error-missing_module",
        "import torch\nimport fused_gemm_kernels\n\n\ndef custom_kernel(data):\n"
        "    return fused_gemm_kernels.run(data)\n",
        {"status": "error", "error_kind": "missing_module"},
    )
    yield Spec(
        "error-no_entry",
        "import torch\n\n\ndef kernel(data):\n    return data\n",
        {"status": "error", "error_kind": "no_entry"},
    )
    yield Spec(
        "error-import_raises",
        "import torch\n\nraise RuntimeError('no GPU found')\n\n\ndef custom_kernel(data):\n"
        "    return data\n",
        {"status": "error", "error_kind": "import_error"},
    )
    runtime = {"status": "error", "error_kind": "runtime_error"}
    yield Spec(
        "error-raises",
        model("Raises.", "raise NotImplementedError('fused path not written yet')"),
        runtime,
    )
    yield Spec(
        "error-shape_mismatch",
        model("Forgets to transpose W.", f"y = x @ self.linear.weight\nreturn {EPILOGUE}"),
        runtime,
    )
    kernel = TritonFused(32, 32, 32, bug="undefined")
    yield Spec(
        "error-triton_undefined_name",
        kernel.source("A Triton kernel that names a variable it never defines."),
        {
            "status": "error",
            "error_kind": "compile_error",
            "cpu": {"error_kind": "runtime_error"},
            "note": "Triton's front-end raises CompilationError at the first launch on a GPU; "
            "the interpreter raises NameError when the line runs",
        },
    )


def hangs() -> Iterator[Spec]:
    timeout = {"status": "error", "error_kind": "timeout"}
    yield Spec("hang-busy", torch_model("Spins forever.", "while True:\n    pass"), timeout)
    yield Spec(
        "hang-sleep",
        torch_model("Sleeps forever.", "while True:\n    time.sleep(1)", imports="import time"),
        timeout,
    )


# -- the hacks: tests/fixtures/batch/hacks/ --------------------------------------------------
def hack_expectation(source: str, path: Path) -> dict[str, Any]:
    first = source.splitlines()[0]
    match = re.fullmatch(r"# expect: (\{.*\})", first)
    if not match:
        raise ValueError(f"{path}: the first line must be '# expect: {{...}}', not {first!r}")
    return json.loads(match[1])


def hacks() -> Iterator[Spec]:
    for path in sorted(HACKS.glob("*.py")):
        source = path.read_text()
        yield Spec(f"hack-{path.stem}", source, hack_expectation(source, path))


def main_batch() -> list[Spec]:
    specs = [
        *slower(),
        *same_speed(),
        *precision(),
        *triton_fused(),
        *triton_epilogue(),
        *wrong(),
        *crashes_and_errors(),
        *hangs(),
        *hacks(),
    ]
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids) or len(specs) != BATCH_SIZE:
        raise AssertionError(f"expected {BATCH_SIZE} unique ids, got {len(set(ids))}/{len(ids)}")
    return specs


# -- load_inline: a torch extension built at import ------------------------------------------
CUDA_EPILOGUE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// variant @VARIANT@
__global__ void scale_leaky_clamp(float* y, int64_t n, float scale, float slope, float bound) {
  int64_t stride = (int64_t)blockDim.x * gridDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v = y[i] * scale;
    v = v >= 0.f ? v : v * @SLOPE@;
    y[i] = @CLAMP@;
  }
}

torch::Tensor epilogue(torch::Tensor y, double scale, double slope, double bound) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat);
  int64_t n = y.numel();
  int threads = @THREADS@;
  int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, @MAX_BLOCKS@);
  scale_leaky_clamp<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), n, (float)scale, (float)slope, (float)bound)@END@
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
CPU_EPILOGUE = r"""
#include <torch/extension.h>
#include <algorithm>

// variant @VARIANT@ (the CPU twin of the CUDA kernel, so the candidate runs anywhere)
torch::Tensor epilogue(torch::Tensor y, double scale, double slope, double bound) {
  TORCH_CHECK(y.is_contiguous() && y.scalar_type() == torch::kFloat);
  float* p = y.data_ptr<float>();
  int64_t n = y.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = p[i] * (float)scale;
    v = v >= 0.f ? v : v * (float)@SLOPE@;
    p[i] = @CLAMP@@END@
  }
  return y;
}
"""
CLAMPS = {  # (CUDA, C++)
    "good": (
        "fminf(fmaxf(v, -bound), bound)",
        "std::min(std::max(v, (float)-bound), (float)bound)",
    ),
    "none": ("v", "v"),
    "undeclared": ("fminf(fmaxf(v, -bnd), bnd)", "std::min(std::max(v, -bnd), bnd)"),
}
LOAD_INLINE = '''"""cuBLAS's GEMM, then the epilogue as one kernel of its own, built at import."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = @CUDA@
CPU_SOURCE = @CPU@
DECLARATION = "torch::Tensor epilogue(torch::Tensor y, double scale, double slope, double bound);"

if torch.cuda.is_available():
    extension = load_inline(
        "@NAME@", cpp_sources=DECLARATION, cuda_sources=CUDA_SOURCE, functions=["epilogue"]
    )
else:
    extension = load_inline("@NAME@", cpp_sources=CPU_SOURCE, functions=["epilogue"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale, slope, bound):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale, self.slope, self.bound = scale, slope, bound

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return extension.epilogue(y, self.scale, self.slope, self.bound)
'''


def load_inline_source(name: str, variant: str, **choices: str) -> str:
    """The candidate's source: the CUDA kernel on a GPU, its C++ twin on a CPU."""
    clamp = CLAMPS[choices.get("clamp", "good")]
    common = {
        "@VARIANT@": variant,
        "@SLOPE@": choices.get("slope", "slope"),
        "@END@": choices.get("end", ";"),
        "@THREADS@": choices.get("threads", "256"),
        "@MAX_BLOCKS@": choices.get("max_blocks", "65535"),
    }
    cuda, cpu = CUDA_EPILOGUE, CPU_EPILOGUE
    for key, value in {**common, "@CLAMP@": clamp[0]}.items():
        cuda = cuda.replace(key, value)
    for key, value in {**common, "@CLAMP@": clamp[1]}.items():
        cpu = cpu.replace(key, value)
    return (
        LOAD_INLINE.replace("@CUDA@", repr(cuda))
        .replace("@CPU@", repr(cpu))
        .replace("@NAME@", name)
    )


def load_inline_batch(salt: str) -> list[Spec]:
    """16 correct (launch shapes vary), 2 wrong, 2 that do not compile: every source new."""
    variants: list[tuple[str, dict[str, str], dict[str, Any]]] = []
    passed = {"status": "passed", "note": "one own kernel after cuBLAS's: faster unconfirmed"}
    for threads in (128, 256, 512, 1024):
        for max_blocks in (132, 264, 1024, 65535):
            choices = {"threads": str(threads), "max_blocks": str(max_blocks)}
            variants.append((f"t{threads}_b{max_blocks}", choices, passed))
    wrong = {"status": "failed", "error_kind": "incorrect_numerical"}
    variants.append(("wrong_slope_sign", {"slope": "-slope"}, wrong))
    variants.append(("wrong_no_clamp", {"clamp": "none"}, wrong))
    broken = {"status": "error", "error_kind": "compile_error"}
    variants.append(("broken_semicolon", {"end": ""}, broken))
    variants.append(("broken_identifier", {"clamp": "undeclared"}, broken))
    specs = [
        Spec(
            f"inline-{label}",
            load_inline_source(f"kb_epilogue_{salt}_{index}", f"{salt}-{index}", **choices),
            expect,
        )
        for index, (label, choices, expect) in enumerate(variants)
    ]
    if len(specs) != LOAD_INLINE_SIZE:
        raise AssertionError(f"expected {LOAD_INLINE_SIZE} load_inline candidates")
    return specs


# -- files -----------------------------------------------------------------------------------
def write_batch(specs: list[Spec], out: Path, stem: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    lines, expected = out / f"{stem}.jsonl", out / f"{stem}.expected.json"
    lines.write_text("".join(spec.line() + "\n" for spec in specs))
    expected.write_text(json.dumps({s.id: s.expect for s in specs}, indent=1) + "\n")
    return lines, expected


def set_task_keys(task_yml: Path, values: dict[str, Any]) -> None:
    """Set top-level scalar keys of a generated task.yml, keeping the rest as written."""
    text = task_yml.read_text()
    for key, value in values.items():
        line = f"{key}: {value}"
        text, found = re.subn(rf"(?m)^{re.escape(key)}:.*$", line, text)
        if not found:
            text = text.rstrip("\n") + f"\n{line}\n"
    task_yml.write_text(text)


def make_repo(dest: Path) -> Path:
    """A repository with the problem's leaderboard, imported as a user would; the importer
    has no option for timeouts, so they are then written into its task.yml."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest_kernelboard.cli", "import", "kernelbench"]
    command += [str(PROBLEMS), "--level", str(LEVEL), "--dest", "leaderboards/kernelbench"]
    subprocess.run(command, cwd=dest, check=True, capture_output=True, text=True)
    set_task_keys(dest / FOLDER / "task.yml", TIMEOUTS)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the JSONL and expectation files")
    parser.add_argument("--repo", type=Path, help="also make a repository with the leaderboard")
    parser.add_argument(
        "--load-inline", action="store_true", help="also write the 20 load_inline candidates"
    )
    parser.add_argument(
        "--salt", default=None, help="makes the load_inline sources unique (default: random)"
    )
    args = parser.parse_args(argv)
    lines, expected = write_batch(main_batch(), args.out, "batch")
    print(f"{lines} ({BATCH_SIZE} candidates), {expected}")
    if args.load_inline:
        specs = load_inline_batch(args.salt or secrets.token_hex(4))
        lines, expected = write_batch(specs, args.out, "load_inline")
        print(f"{lines} ({LOAD_INLINE_SIZE} candidates), {expected}")
    if args.repo:
        make_repo(args.repo)
        print(
            f"{args.repo}: leaderboard {LEADERBOARD} ({', '.join(f'{k} {v}' for k, v in TIMEOUTS.items())})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
