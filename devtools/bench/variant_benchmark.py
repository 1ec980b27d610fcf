"""`poolq bench`: poolq's engine in each compute dtype beside what users would pick instead
(sentence-transformers on torch fp32, and its ONNX Runtime and OpenVINO backends where they
import), same texts and token counts, one process, interleaved rounds. Reports the CPU's ISA
features, each variant's dtype, tokens/s, its ratio to ST torch fp32 and its lowest cosine
to ST torch fp32's vectors."""
from __future__ import annotations

from poolq.devtools.bench.corpora import build_corpora
from poolq.devtools.bench.variant_timing import min_cosine, time_variants
from poolq.devtools.bench.variants import Variant, poolq_variant, st_variant

REFERENCE = "ST torch"


def run_variants(model: str = "all-MiniLM-L6-v2", *, dtypes: tuple[str, ...] = ("float32", "int8"),
                 backends: tuple[str, ...] = ("torch", "onnx", "openvino"), rounds: int = 3, num_mixed: int = 200,
                 batch_size: int = 32, threads: int | None = None, num_long: int | None = None) -> dict:
    import torch

    from poolq.engine import ModelRegistry
    from poolq.engine.hardware import cpu_flags, cpu_model, noted_flags, resolve_dtype
    from poolq.engine.tokenizer import TextTokenizer

    if threads:
        torch.set_num_threads(threads)
    registry = ModelRegistry.with_packaged_models()
    tokenizer = TextTokenizer(registry.resolve(model))  # the corpora's; the variants load their own weights
    window = registry.spec(model).max_position_tokens
    found = [poolq_variant(model, dtype, registry) for dtype in dtypes]
    # ST on torch always: it is the reference of every ratio and cosine.
    found += [st_variant(str(registry.resolve(model)), backend, window, batch_size)
              for backend in dict.fromkeys(("torch", *backends))]
    variants = [v for v in found if isinstance(v, Variant)]
    skipped = [v for v in found if isinstance(v, str)]
    if not any(v.name == REFERENCE for v in variants):
        raise RuntimeError("sentence-transformers on torch (the reference) did not load: " + "; ".join(skipped))
    flags = cpu_flags()
    corpora = []
    for corpus in build_corpora(tokenizer, num_mixed=num_mixed, window=window, num_long=num_long):
        timed = time_variants(variants, corpus.texts, rounds)
        reference = next(t for t in timed if t.variant.name == REFERENCE)
        corpora.append({"corpus": corpus.name, "texts": len(corpus.texts), "tokens": corpus.num_tokens, "variants": [
            {"name": t.variant.name, "dtype": t.variant.dtype, "tokens_per_s": corpus.num_tokens / t.median_s,
             "vs_st_fp32": reference.median_s / t.median_s, "min_cos_vs_st_fp32": min_cosine(t.vectors, reference.vectors)}
            for t in timed]})
    return {"model": model, "rounds": rounds, "threads": torch.get_num_threads(), "cpu_model": cpu_model() or "unknown",
            "isa_flags": noted_flags(flags), "auto_dtype": resolve_dtype("auto", "cpu"),
            "skipped": skipped, "corpora": corpora}

