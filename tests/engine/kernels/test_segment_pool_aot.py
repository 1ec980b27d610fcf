"""Every segment-pooling kernel variant compiles for real GPUs (sm_80, sm_90), without a GPU.

The interpreter accepts programs a GPU compiler rejects, so each target's compile runs in its own
subprocess *without* TRITON_INTERPRET (set process-wide by conftest): ``triton.compile`` on an
``ASTSource`` lowers through ttir/ttgir/llir/ptx to a cubin with the bundled ptxas. Both targets
compile concurrently. Where CUDA is available, the compiled kernels also run against the reference.
This file is also the subprocesses' script: ``python <this file> 90`` or ``python <this file> gpu``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (optional at run time)")

REPO_ROOT = Path(__file__).resolve().parents[3]
CAPABILITIES = (80, 90)
HIDDEN_SIZE = 384  # MiniLM: default_config gives BLOCK_H 256 (mean: BLOCK_T 32, first/last: 1)
# Args the JIT specializes for a contiguous, 16-byte-aligned hidden with H % 16 == 0
# (ends = cu_seqlens[1:] is 4 bytes off, so it gets no divisibility hint).
ALIGNED_ARGS = ("x_ptr", "starts_ptr", "out_ptr", "H", "h_span", "stride_xt")


def variants() -> list[tuple[str, str, bool, bool]]:
    """(dtype, mode, normalize, contiguous) to compile: each mode x normalize once on a contiguous
    hidden, dtypes rotated so each meets two modes and both normalize values, plus unspecialized
    (strided) builds of the mean kernel. The full 18-way product costs about 7 s per target here."""
    contiguous = [
        ("float32", "mean", False), ("bfloat16", "mean", True), ("bfloat16", "first", False),
        ("float16", "first", True), ("float16", "last", False), ("float32", "last", True),
    ]
    strided = [("float16", "mean", False), ("bfloat16", "mean", True)]
    return [(*v, True) for v in contiguous] + [(*v, False) for v in strided]


def _ast_source(sp, dtype: str, mode: str, normalize: bool, contiguous: bool):
    """The ASTSource a launch with these arguments compiles, and its launch config."""
    from triton.compiler import ASTSource

    config = sp.default_config(HIDDEN_SIZE, mode)
    signature = sp.kernel_signature(getattr(torch, dtype))
    constexprs = sp.kernel_constexprs(mode, normalize, config)
    attrs = {}
    if contiguous:
        signature["stride_xh"] = "constexpr"  # the JIT turns an int argument equal to 1 into a constant
        constexprs["stride_xh"] = 1
        names = list(signature)
        attrs = {(names.index(name),): [["tt.divisibility", 16]] for name in ALIGNED_ARGS}
    fn = sp._span_pool_kernel
    return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs), config


def _device_guard_message(sp) -> str:
    """Compiled (non-interpreted) kernels must refuse CPU tensors with a ValueError."""
    try:
        sp.segment_mean(torch.zeros(2, 4), torch.tensor([0, 2], dtype=torch.int32))
    except ValueError as exc:
        return str(exc)
    return ""


def compile_all(capability: int) -> dict:
    """Compile every variant for ``cuda:capability``; return a JSON-able summary."""
    import triton
    from triton.backends.compiler import GPUTarget

    from poolq.engine.kernels import segment_pool as sp

    assert not os.environ.get("TRITON_INTERPRET"), "the AOT check must run without the interpreter"
    target = GPUTarget("cuda", capability, 32)
    compiled = []
    for variant in variants():
        source, config = _ast_source(sp, *variant)
        kernel = triton.compile(source, target=target, options={"num_warps": config.num_warps})
        compiled.append({"variant": list(variant), "cubin_bytes": len(kernel.asm["cubin"]),
                         "shared": kernel.metadata.shared})
    return {"capability": capability, "compiled": compiled, "device_guard": _device_guard_message(sp)}


def run_on_gpu() -> dict:
    """Compiled kernels on CUDA vs the reference: every dtype x mode x normalize, plus spans."""
    from poolq.engine.kernels import segment_pool as sp
    from poolq.engine.kernels import segment_pool_ref as ref

    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(0, 300, (64,), generator=gen)
    lengths[:3] = torch.tensor([0, 1, 513])
    cu = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(torch.int32).cuda()
    worst = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        hidden = torch.randn(int(cu[-1]), 392, generator=gen).to(dtype).cuda()[:, :390]  # strided rows
        for mode in ("mean", "first", "last"):
            for normalize in (False, True):
                out = getattr(sp, f"segment_{mode}")(hidden, cu, normalize)
                expected = getattr(ref, f"segment_{mode}_ref")(hidden, cu, normalize)
                torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
                worst[f"{dtype}-{mode}-{normalize}"] = float((out - expected).abs().max())
    starts, ends = cu[:-1] // 2, torch.minimum(cu[1:], cu[:-1] + 64)  # overlapping spans
    torch.testing.assert_close(sp.span_mean(hidden, starts, ends, True), ref.span_mean_ref(hidden, starts, ends, True))
    return worst


def _subprocess_env(tmp: Path) -> dict:
    """This environment without TRITON_INTERPRET, with the repo importable and a private triton cache."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return env


@pytest.fixture(scope="module")
def aot_results(tmp_path_factory) -> dict:
    """Run one compile subprocess per capability, all at once; {capability: (returncode, stdout, stderr)}."""
    tmp = tmp_path_factory.mktemp("aot")
    env = _subprocess_env(tmp)
    procs = {}
    for cc in CAPABILITIES:
        out, err = open(tmp / f"{cc}.out", "w+"), open(tmp / f"{cc}.err", "w+")
        cmd = [sys.executable, str(Path(__file__).resolve()), str(cc)]
        procs[cc] = (subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=out, stderr=err), out, err)
    results = {}
    for cc, (proc, out, err) in procs.items():
        code = proc.wait(timeout=300)
        out.seek(0), err.seek(0)
        results[cc] = (code, out.read(), err.read())
        out.close(), err.close()
    return results


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_every_variant_compiles_to_a_cubin(aot_results, capability):
    code, stdout, stderr = aot_results[capability]
    assert code == 0, f"sm_{capability} compile failed:\n{stderr[-6000:]}"
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert [entry["variant"] for entry in summary["compiled"]] == [list(v) for v in variants()]
    assert all(entry["cubin_bytes"] > 0 for entry in summary["compiled"])


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_compiled_kernels_refuse_cpu_tensors(aot_results, capability):
    code, stdout, _ = aot_results[capability]
    assert code == 0
    message = json.loads(stdout.strip().splitlines()[-1])["device_guard"]
    assert "needs CUDA tensors" in message and "segment_pool_ref" in message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_kernels_match_the_reference_on_a_gpu(tmp_path):
    cmd = [sys.executable, str(Path(__file__).resolve()), "gpu"]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=_subprocess_env(tmp_path), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]


if __name__ == "__main__":
    print(json.dumps(run_on_gpu() if sys.argv[1] == "gpu" else compile_all(int(sys.argv[1]))))
