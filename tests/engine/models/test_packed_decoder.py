"""The packed RoPE decoders (Llama, Mistral, Qwen2, Qwen3, Gemma3) equal transformers' own forward
of each sequence alone, and the engine picks them."""
import numpy as np
import pytest
import torch
import transformers
from support.packed_models import hf_alone, min_cosine, packed_run, random_ids
from support.random_models import save_random_model

from poolq.engine import EngineConfig, PoolingEngine
from poolq.engine.loading.int8_runner import quantize_runner
from poolq.engine.loading.model_loader import make_runner
from poolq.engine.models import PackedDecoder, PackedGemma3Decoder, packed_encoder, supports
from poolq.engine.models.int8_encoder import Int8Refused
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.runners.runner import ModelRunner

TINY = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=512)
WINDOW = 8  # sliding windows far shorter than the longest sequences
LENGTHS = [5, 1, 40, 300, 17]  # 300: past a query block of a windowed layer (attention.WINDOW_BLOCK)
CASES = {
    "llama": lambda: transformers.LlamaConfig(**TINY),
    "llama-linear-rope": lambda: transformers.LlamaConfig(
        **TINY, rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 500.0}),
    "mistral-sliding": lambda: transformers.MistralConfig(**TINY, sliding_window=WINDOW),
    # sliding layers from max_window_layers on, full ones below: both kinds in one model
    "qwen2-sliding": lambda: transformers.Qwen2Config(**TINY, use_sliding_window=True, sliding_window=WINDOW,
                                                      max_window_layers=1),
    # head_dim * heads (128) differs from hidden (64); per-head q/k RMSNorm
    "qwen3": lambda: transformers.Qwen3Config(**{**TINY, "num_attention_heads": 8}, head_dim=16),
    "gemma3-causal": lambda: _gemma3_config(bidirectional=False),
    "gemma3-bidirectional": lambda: _gemma3_config(bidirectional=True),  # EmbeddingGemma's layout
}


def _gemma3_config(bidirectional: bool, **overrides) -> transformers.Gemma3TextConfig:
    values = {**TINY, "num_hidden_layers": 4, "head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": WINDOW,
              "layer_types": ["sliding_attention", "full_attention"] * 2, "use_bidirectional_attention": bidirectional}
    return transformers.Gemma3TextConfig(**{**values, **overrides})


def _tiny_model(case: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(CASES[case](), attn_implementation="sdpa").eval()
    with torch.no_grad():  # Gemma3 starts its RMSNorm weights at 0 (scale 1): give every norm a real scale
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize("case", CASES)
def test_tiny_decoders_match_hf_run_on_each_sequence_alone(case):
    # Given a random tiny decoder and sequences of 1 to 300 tokens
    model = _tiny_model(case)
    ids = random_ids(LENGTHS, TINY["vocab_size"])
    encoder = packed_encoder(model)
    assert type(encoder) is (PackedGemma3Decoder if case.startswith("gemma3") else PackedDecoder)
    # When they run packed, then each token equals transformers' forward of its sequence alone
    torch.testing.assert_close(packed_run(encoder, ids), hf_alone(model, ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", ["mistral-sliding", "qwen2-sliding", "gemma3-causal", "gemma3-bidirectional"])
def test_the_sliding_window_and_causality_matter_in_these_cases(case):
    # The parity above would hide a forgotten window or mask if sequences never reached them
    model = _tiny_model(case)
    ids = random_ids(LENGTHS, TINY["vocab_size"])
    encoder = packed_encoder(model)
    expected = hf_alone(model, ids)
    windows = [layer.attention.window for layer in encoder.layers]
    assert any(w is not None and w < max(LENGTHS) for w in windows)
    for layer in encoder.layers:
        layer.attention.window = None
    assert (packed_run(encoder, ids) - expected).abs().max() > 1e-2
    for layer, window in zip(encoder.layers, windows):
        layer.attention.window, layer.attention.causal = window, not layer.attention.causal
    assert (packed_run(encoder, ids) - expected).abs().max() > 1e-2


def test_gemma3_bidirectional_reads_the_halved_window_and_sees_both_sides():
    # transformers turns EmbeddingGemma's window into sliding_window // 2 + 1, exclusive, on both sides
    encoder = packed_encoder(_tiny_model("gemma3-bidirectional"))
    assert [(layer.attention.window, layer.attention.causal) for layer in encoder.layers] == [
        (WINDOW // 2, False), (None, False)] * 2
    causal = packed_encoder(_tiny_model("gemma3-causal"))
    assert [(layer.attention.window, layer.attention.causal) for layer in causal.layers] == [
        (WINDOW - 1, True), (None, True)] * 2


@pytest.mark.parametrize("case", ["qwen3", "gemma3-bidirectional"])
def test_bfloat16_packed_agrees_with_hf_bfloat16(case):
    model = _tiny_model(case).to(torch.bfloat16)
    ids = random_ids(LENGTHS[:3], TINY["vocab_size"])
    packed = packed_run(packed_encoder(model), ids)
    assert packed.dtype == torch.bfloat16
    assert min_cosine(packed, hf_alone(model, ids)) >= 0.999


def test_the_decoder_shares_the_hf_parameters():
    model = _tiny_model("qwen3")
    encoder = PackedDecoder(model)
    assert {id(p) for p in model.parameters()} == {id(p) for p in encoder.parameters()}


def test_models_without_an_exact_packed_forward_keep_the_padded_runner():
    dynamic = transformers.LlamaConfig(**TINY, rope_parameters={"rope_type": "dynamic", "factor": 2.0,
                                                                "rope_theta": 10000.0})
    declined = [
        transformers.LlamaModel(dynamic),  # frequencies depend on the call's length
        transformers.LlamaModel(transformers.LlamaConfig(**TINY, is_causal=False)),
        transformers.Gemma3TextModel(_gemma3_config(False, attn_logit_softcapping=50.0)),
        transformers.GPT2Model(transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4)),  # no packed family
    ]
    for model in declined:
        assert not supports(model) and packed_encoder(model) is None
        assert isinstance(make_runner(model, torch.device("cpu"), 0, packed=True), ModelRunner)
    with pytest.raises(ValueError, match="PackedDecoder does not support LlamaModel"):
        PackedDecoder(declined[0])
    assert isinstance(make_runner(_tiny_model("llama"), torch.device("cpu"), 0, packed=False), ModelRunner)


def test_int8_is_refused_for_a_packed_decoder():
    runner = make_runner(_tiny_model("llama"), torch.device("cpu"), 0, packed=True)
    assert isinstance(runner, PackedRunner)
    with pytest.raises(Int8Refused, match="BERT-family encoders"):
        quantize_runner(runner, tokenizer=None, window_tokens=512)


TEXTS = ["a short one", "The quick brown fox jumps over the lazy dog near the river bank, " * 8, "x"]


@pytest.mark.parametrize(("case", "model_class"), [("qwen3", "Qwen3Model"), ("gemma3-bidirectional", "Gemma3TextModel")])
def test_the_engine_runs_saved_decoders_packed_and_embeds_as_the_padded_runner(case, model_class, tmp_path):
    # Given a random decoder saved with MiniLM's tokenizer (vocabulary 30522)
    config = CASES[case]()
    config.vocab_size, config.pad_token_id = 30522, 0
    save_random_model(tmp_path, getattr(transformers, model_class), config)
    # When the engine loads it with the packed path on and off
    packed = PoolingEngine.from_pretrained(str(tmp_path), dtype="float32")
    padded = PoolingEngine.from_pretrained(str(tmp_path), dtype="float32", config=EngineConfig(packed=False))
    # Then the packed runner is chosen, and its embeddings (last-token pooling) are the padded runner's
    assert isinstance(packed.runner, PackedRunner) and isinstance(padded.runner, ModelRunner)
    np.testing.assert_allclose(packed.embed(TEXTS), padded.embed(TEXTS), atol=1e-5)
