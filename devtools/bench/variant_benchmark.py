"""`poolq bench`: poolq's engine in each compute dtype beside what users would pick instead
(sentence-transformers on torch fp32, and its ONNX Runtime and OpenVINO backends where they
import), same texts and token counts, one process, interleaved rounds. Reports the CPU's ISA
features, each variant's dtype, tokens/s, its ratio to ST torch fp32, its lowest cosine
to ST torch fp32's vectors, and its model FLOPs utilisation (roofline.py: the GEMM peak measured
here in the variant's dtype; OpenVINO's "default" precision is the CPU's native one, auto's)."""
from __future__ import annotations

from poolq.devtools.bench.corpora import build_corpora
from poolq.devtools.bench.roofline import GEMM_SHAPE, encoder_flops, measure_gemm_peak, mfu
from poolq.devtools.bench.variant_timing import min_cosine, time_variants
from poolq.devtools.bench.variants import Variant, poolq_variant, st_variant

REFERENCE = "ST torch"


def run_variants(model: str = "all-MiniLM-L6-v2", *, dtypes: tuple[str, ...] = ("auto", "float32", "int8"),
                 backends: tuple[str, ...] = ("torch", "onnx", "openvino"), rounds: int = 3, num_mixed: int = 200,
                 batch_size: int = 32, threads: int | None = None, num_long: int | None = None) -> dict:
    import torch
    import transformers

    from poolq.engine import ModelRegistry
    from poolq.engine.device.hardware import cpu_flags, cpu_model, noted_flags, resolve_dtype
    from poolq.engine.tokenizer import TextTokenizer

    if threads:
        torch.set_num_threads(threads)
    registry = ModelRegistry.with_packaged_models()
    tokenizer = TextTokenizer(registry.resolve(model))  # the corpora's; the variants load their own weights
    window = registry.spec(model).max_position_tokens
    auto = resolve_dtype("auto", "cpu")
    # auto runs as itself: a dtype it resolves to is not run twice
    found = [poolq_variant(model, dtype, registry) for dtype in dtypes if not (dtype == auto and "auto" in dtypes)]
    # ST on torch always: it is the reference of every ratio and cosine.
    found += [st_variant(str(registry.resolve(model)), backend, window, batch_size)
              for backend in dict.fromkeys(("torch", *backends))]
    variants = [v for v in found if isinstance(v, Variant)]
    skipped = [v for v in found if isinstance(v, str)]
    if not any(v.name == REFERENCE for v in variants):
        raise RuntimeError("sentence-transformers on torch (the reference) did not load: " + "; ".join(skipped))
    flags = cpu_flags()
    peaks = {dtype: measure_gemm_peak(dtype) for dtype in sorted({_peak_dtype(v.dtype, auto) for v in variants})}
    hf_config = transformers.AutoConfig.from_pretrained(str(registry.resolve(model)), local_files_only=True)
    corpora = []
    for corpus in build_corpora(tokenizer, num_mixed=num_mixed, window=window, num_long=num_long):
        timed = time_variants(variants, corpus.texts, rounds)
        reference = next(t for t in timed if t.variant.name == REFERENCE)
        flops = encoder_flops(hf_config, corpus_lengths(tokenizer, corpus.texts, window))
        corpora.append({"corpus": corpus.name, "texts": len(corpus.texts), "tokens": corpus.num_tokens,
                        "gflop": flops / 1e9, "variants": [
            {"name": t.variant.name, "dtype": t.variant.dtype, "tokens_per_s": corpus.num_tokens / t.median_s,
             "vs_st_fp32": reference.median_s / t.median_s, "min_cos_vs_st_fp32": min_cosine(t.vectors, reference.vectors),
             "mfu": mfu(flops, t.median_s, peaks[_peak_dtype(t.variant.dtype, auto)])}
            for t in timed]})
    return {"model": model, "rounds": rounds, "threads": torch.get_num_threads(), "cpu_model": cpu_model() or "unknown",
            "isa_flags": noted_flags(flags), "auto_dtype": auto, "gemm_shape": list(GEMM_SHAPE),
            "gemm_peak_gflops": peaks, "skipped": skipped, "corpora": corpora}


def _peak_dtype(variant_dtype: str, auto: str) -> str:
    """The dtype whose GEMM peak bounds a variant: its own; a backend's "default" is the native one."""
    return auto if variant_dtype == "default" else variant_dtype


def corpus_lengths(tokenizer, texts: list[str], window: int) -> list[int]:
    """Each text's sequence length as the model sees it: its tokens, the special ones, the window's cap."""
    return [min(window, len(ids) + tokenizer.num_special_tokens) for ids in tokenizer.count_and_tokenize(texts)]

