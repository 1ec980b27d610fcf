"""The compiled layer stack (EngineConfig.compile_encoder, off by default): that the loader compiles only as
configured, that it equals the eager packed forward on tiny models with one graph for
every token count, that it waits for ``compile_after_tokens``, and that a failed compile falls back to
eager. Only tiny models are compiled here; SPLADE-tiny's bf16 gate is in test_precision_quality.py, and
MiniLM's is measured by `poolq bench` (docs/benchmarks.md)."""
import pytest
import torch
import transformers
from test_packed_bert import TINY, _cu_seqlens

from poolq.engine import EngineConfig, PoolingEngine
from poolq.engine.config import EngineConfigError
from poolq.engine.models import PackedBertEncoder
from poolq.engine.models.compiled_encoder import CompiledBertEncoder, can_compile


def _tiny_encoder(family: str) -> PackedBertEncoder:
    torch.manual_seed(0)
    config = transformers.BertConfig(**TINY) if family == "bert" else transformers.MPNetConfig(**TINY)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    return PackedBertEncoder(model)


def _pack(lengths: list[int], seed: int):
    ids = torch.randint(3, TINY["vocab_size"], (sum(lengths),), generator=torch.Generator().manual_seed(seed))
    return ids, torch.cat([torch.arange(n) for n in lengths]), _cu_seqlens(lengths), max(lengths)


@pytest.mark.parametrize("family", ["bert", "mpnet"])  # MPNet: its relative position bias goes into the graph
def test_the_compiled_stack_equals_the_eager_one_with_one_graph_for_all_token_counts(family):
    from torch._dynamo.utils import counters

    eager = _tiny_encoder(family)
    compiled = CompiledBertEncoder(eager)
    graphs = counters["stats"]["unique_graphs"]
    # token counts 9, 50 and 13, with runs of equal lengths and a single-token sequence
    for seed, lengths in enumerate([[3, 6], [20, 20, 1, 9], [13]]):
        pack = _pack(lengths, seed)
        with torch.inference_mode():
            torch.testing.assert_close(compiled(*pack), eager(*pack), atol=1e-5, rtol=1e-5)
    assert compiled.failed is None
    assert counters["stats"]["unique_graphs"] - graphs == 1  # dynamic token counts: compiled once


def test_a_failed_compile_runs_eager_from_then_on():
    eager = _tiny_encoder("bert")
    calls = []

    def no_compiler(*args):
        calls.append(args)
        raise torch._inductor.exc.InductorError(OSError("no C++ compiler here"), None)

    compiled = CompiledBertEncoder(eager, compiler=lambda stack: no_compiler)
    pack = _pack([4, 7], 0)
    with torch.inference_mode():
        torch.testing.assert_close(compiled(*pack), eager(*pack), atol=0, rtol=0)
        compiled(*pack)
    assert len(calls) == 1 and "no C++ compiler here" in compiled.failed


def test_the_stack_runs_eager_until_after_tokens_have_gone_through():
    eager = _tiny_encoder("bert")
    compiled_calls = []

    def compiled_forward(hidden, cu_seqlens, position_bias):
        compiled_calls.append(hidden.shape[0])
        return hidden

    compiled = CompiledBertEncoder(eager, after_tokens=10, compiler=lambda stack: compiled_forward)
    with torch.inference_mode():
        for lengths in ([4, 5], [20, 30], [7]):  # 9 tokens (1 left), 50 (past the threshold), then compiled
            compiled(*_pack(lengths, 0))
    assert compiled_calls == [7]


def test_only_plain_packed_bert_layers_compile():
    encoder = _tiny_encoder("bert")
    assert can_compile(encoder)
    encoder.layers[0].bias_norm = lambda summed, bias, norm: norm(summed + bias)  # fused norms (fuse_norms)
    assert not can_compile(encoder)
    with pytest.raises(ValueError, match="plain layers"):
        CompiledBertEncoder(encoder)


def test_the_loader_compiles_only_as_configured():
    def encoder(**config):
        return PoolingEngine.from_pretrained("splade-tiny", config=EngineConfig(**config)).runner.encoder

    assert type(encoder(dtype="bfloat16")) is PackedBertEncoder  # off by default, on every CPU
    compiled = encoder(dtype="bfloat16", compile_encoder=True)
    assert isinstance(compiled, CompiledBertEncoder) and compiled.eager_tokens_left == EngineConfig().compile_after_tokens
    forced = encoder(dtype="float32", compile_encoder=True, compile_after_tokens=0)
    assert isinstance(forced, CompiledBertEncoder) and forced.eager_tokens_left == 0


def test_compiling_for_a_gpu_or_after_negative_tokens_is_refused_by_name():
    with pytest.raises(EngineConfigError, match="compile_encoder compiles for the CPU"):
        EngineConfig(device="cuda", compile_encoder=True)
    with pytest.raises(EngineConfigError, match="compile_after_tokens must be >= 0, got -1"):
        EngineConfig(compile_after_tokens=-1)
