"""GPU check: CUDA outputs against the CPU reference, then the benchmark on the GPU.

Run on a machine with an NVIDIA GPU:  bash infra/gpu/check.sh
Prints a correctness line per check and a table of timings; exits non-zero on a mismatch.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def check_engine_matches_cpu(model: str, texts: list[str]) -> float:
    """Worst relative error of CUDA bf16 vectors against CPU fp32 (must be <= 1e-2)."""
    import numpy as np

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    cpu = PoolingEngine.from_pretrained(model).embed(texts, normalize=False, policy=policy)
    gpu = PoolingEngine.from_pretrained(model, device="cuda", dtype="bfloat16").embed(texts, normalize=False, policy=policy)
    return float((np.linalg.norm(gpu - cpu, axis=1) / np.linalg.norm(cpu, axis=1)).max())


def check_span_mean_kernel() -> float:
    import torch

    from poolq.engine.kernels.segment_pool import span_mean
    from poolq.engine.kernels.segment_pool_ref import span_mean_ref

    hidden = torch.randn(4000, 768, device="cuda", dtype=torch.bfloat16)
    starts = torch.tensor([0, 10, 500, 3999], device="cuda", dtype=torch.int32)
    ends = torch.tensor([10, 500, 3999, 4000], device="cuda", dtype=torch.int32)
    return float((span_mean(hidden, starts, ends) - span_mean_ref(hidden, starts, ends)).abs().max())


def base_size_encoder(directory: Path) -> Path:
    """A random-weight BERT-base-size encoder (12 layers, hidden 768) with MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    from poolq.engine import ModelRegistry

    torch.manual_seed(0)
    bert_config = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    BertModel(bert_config).save_pretrained(directory)
    minilm = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm / name, directory / name)
    return directory


def main() -> int:
    import torch

    from poolq.api.bench import run_benchmark
    from poolq.api.demo.demo import load_sample_corpus

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 2
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    texts = [doc["text"] for doc in load_sample_corpus()]
    failures = 0
    error = check_engine_matches_cpu("all-MiniLM-L6-v2", texts)
    failures += error > 1e-2
    print(f"MiniLM CUDA bf16 vs CPU fp32: max relative error {error:.2e} ({'ok' if error <= 1e-2 else 'FAIL'})")
    kernel_error = check_span_mean_kernel()
    failures += kernel_error > 1e-3
    print(f"Triton span_mean vs torch reference (bf16 in, fp32 out): max abs error {kernel_error:.2e}")
    with tempfile.TemporaryDirectory() as tmp:
        models = {"all-MiniLM-L6-v2": "all-MiniLM-L6-v2", "bert-base-random": str(base_size_encoder(Path(tmp)))}
        print(f"{'model':18} {'corpus':7} {'poolq tok/s':>12} {'ST fp16 tok/s':>14} {'ratio':>6} {'TFLOP/s':>8} {'%peak':>6}")
        for label, model in models.items():
            report = run_benchmark(model, rounds=3, num_mixed=2000, batch_size=128, device="cuda", dtype="bfloat16")
            for r in report["corpora"]:
                tflops = r["poolq_peak_fraction"] * report["matmul_peak_gflops"] / 1000
                print(f"{label:18} {r['corpus']:7} {r['poolq_tokens_per_s']:>12.0f} {r['baseline_tokens_per_s']:>14.0f} "
                      f"{r['ratio']:>6.2f} {tflops:>8.1f} {100 * r['poolq_peak_fraction']:>5.0f}%")
        print(f"bf16 matmul peak measured: {report['matmul_peak_gflops'] / 1000:.0f} TFLOP/s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
