"""Does ``torch.compile`` make the packed forward faster here? Eager vs compiled, per compute dtype.

The packed layer's dense part (residual, LayerNorm, the FFN's two GEMMs and GELU) is compiled per
layer with inductor's ``freezing`` on, which constant-folds the weights and prepacks them for
oneDNN/MKL (the "reorder weights once at load" route); attention stays the eager per-sequence
SDPA loop, since its Python loop over sequences is a graph break anyway. Shapes are dynamic in
the token count. Same texts, one process, interleaved rounds, medians; cos vs eager float32.

    python3 infra/bench/compile_probe.py [--dtypes float32,bfloat16] [--texts 120] [--rounds 3]
"""
from __future__ import annotations

import argparse
import time


def _compiled_dense(layer, torch):
    """A module computing the layer's post-attention part, its weights frozen into the graph."""

    class Dense(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn_out, self.attn_norm = layer.attn_out, layer.attn_norm
            self.ffn_in, self.ffn_out, self.ffn_norm = layer.ffn_in, layer.ffn_out, layer.ffn_norm
            self.attn_out_bias = layer.attn_out_bias

        def forward(self, hidden, context):  # [T, hidden] each
            hidden = self.attn_norm(hidden + torch.nn.functional.linear(context, self.attn_out.weight)
                                    + self.attn_out_bias)
            intermediate = torch.nn.functional.gelu(self.ffn_in(hidden))
            return self.ffn_norm(hidden + self.ffn_out(intermediate))

    return torch.compile(Dense().eval(), dynamic=True)


def _compiled_forward(encoder, torch):
    """The encoder's forward with each layer's dense part compiled (its attention eager, the engine's own)."""
    dense = [_compiled_dense(layer, torch) for layer in encoder.layers]

    def forward(input_ids, position_ids, cu_seqlens_cpu, max_seqlen, token_type_ids=None, *, cu_seqlens_dev=None):
        hidden = encoder.embeddings(input_ids, position_ids, token_type_ids)  # [T, hidden]
        packed = encoder.packed_pass(hidden, cu_seqlens_cpu, max_seqlen, cu_seqlens_dev)
        for layer, dense_part in zip(encoder.layers, dense):
            hidden = dense_part(hidden, layer.attention_context(hidden, packed))
        return hidden

    return forward


def run(model: str, dtypes: list[str], texts: int, rounds: int,
        freezing: bool = True) -> list[tuple[str, float, float, float]]:
    """(variant, median seconds, tokens/s, min cos vs eager float32) per variant."""
    import torch
    import torch._inductor.config as inductor_config

    from poolq.devtools.bench.corpora import build_corpora
    from poolq.devtools.bench.variant_timing import min_cosine, time_variants
    from poolq.devtools.bench.variants import Variant
    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    inductor_config.freezing = freezing
    # One graph per layer module per dtype: more than dynamo's default of 8 cached graphs per frame.
    torch._dynamo.config.cache_size_limit = 64
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    variants, corpus = [], None
    for dtype in dtypes:
        eager = PoolingEngine.from_pretrained(model, dtype=dtype)
        corpus = corpus or build_corpora(eager.tokenizer, num_mixed=texts, window=eager.spec.max_position_tokens)[0]
        compiled = PoolingEngine.from_pretrained(model, dtype=dtype)
        compiled.runner.encoder.forward = _compiled_forward(compiled.runner.encoder, torch)
        start = time.perf_counter()
        compiled.embed(corpus.texts, policy=policy)  # compiles (dynamic shapes: once, not per batch)
        print(f"{dtype}: compile + first pass {time.perf_counter() - start:.0f} s")
        for name, engine in ((f"eager {dtype}", eager), (f"compiled {dtype}", compiled)):
            variants.append(Variant(name, dtype, lambda batch, engine=engine: engine.embed(batch, policy=policy)))
    timed = time_variants(variants, corpus.texts, rounds)
    reference = next((t.vectors for t in timed if t.variant.name == "eager float32"), timed[0].vectors)
    return [(t.variant.name, t.median_s, corpus.num_tokens / t.median_s, min_cosine(reference, t.vectors))
            for t in timed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--texts", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-freezing", action="store_true", help="weights as graph inputs, not prepacked")
    args = parser.parse_args()
    from poolq.engine.hardware import noted_flags

    print("CPU features:", ", ".join(noted_flags()) or "none of note")
    rows = run(args.model, args.dtypes.split(","), args.texts, args.rounds, freezing=not args.no_freezing)
    base = rows[0][2]
    print("| variant | median s | tok/s | vs first | cos vs eager fp32, min |")
    print("|---|---|---|---|---|")
    for name, median_s, tok_s, cos in rows:
        print(f"| {name} | {median_s:.2f} | {tok_s:,.0f} | {tok_s / base:.2f} | {cos:.5f} |")


if __name__ == "__main__":
    main()
