"""The packed ModernBERT forward equals transformers' own forward of each sequence alone, and the engine picks it."""
import numpy as np
import pytest
import torch
import transformers
from support.packed_models import hf_alone, min_cosine, packed_run, random_ids
from support.random_models import save_random_model

from poolq.engine import EngineConfig, PoolingEngine
from poolq.engine.models import PackedModernBertEncoder, packed_encoder
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.runners.runner import ModelRunner

LOCAL_ATTENTION = 8  # a local layer sees 4 tokens on either side
LENGTHS = [5, 1, 40, 300, 17]  # 300: past a query block of a local layer (attention.WINDOW_BLOCK)


def _config(**overrides) -> transformers.ModernBertConfig:
    values = dict(vocab_size=99, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                  max_position_embeddings=512, global_attn_every_n_layers=2, local_attention=LOCAL_ATTENTION,
                  global_rope_theta=160000.0, local_rope_theta=10000.0, pad_token_id=0, bos_token_id=1,
                  eos_token_id=2, cls_token_id=1, sep_token_id=2)
    return transformers.ModernBertConfig(**{**values, **overrides})


def _tiny_model(**overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(_config(**overrides), attn_implementation="sdpa").eval()


def test_tiny_modernbert_matches_hf_run_on_each_sequence_alone():
    # Given a random ModernBERT whose layers alternate global and local attention
    model = _tiny_model()
    ids = random_ids(LENGTHS, 99)
    encoder = packed_encoder(model)
    assert isinstance(encoder, PackedModernBertEncoder)
    assert [(layer.rope_key, layer.window) for layer in encoder.layers] == [
        ("full_attention", None), ("sliding_attention", LOCAL_ATTENTION // 2)] * 2
    # When sequences of 1 to 300 tokens run packed, then each token equals HF's forward of its sequence alone
    expected = hf_alone(model, ids)
    torch.testing.assert_close(packed_run(encoder, ids), expected, atol=1e-5, rtol=1e-5)
    # And the local window mattered: without it the result is another
    for layer in encoder.layers:
        layer.window = None
    assert (packed_run(encoder, ids) - expected).abs().max() > 1e-2


def test_norm_biases_and_mlp_biases_where_a_config_has_them():
    model = _tiny_model(norm_bias=True, mlp_bias=True, attention_bias=True)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0.0, 0.1)
    ids = random_ids(LENGTHS, 99, seed=2)
    torch.testing.assert_close(packed_run(packed_encoder(model), ids), hf_alone(model, ids), atol=1e-5, rtol=1e-5)


def test_bfloat16_packed_agrees_with_hf_bfloat16():
    model = _tiny_model().to(torch.bfloat16)
    ids = random_ids(LENGTHS[:3], 99)
    packed = packed_run(packed_encoder(model), ids)
    assert packed.dtype == torch.bfloat16
    assert min_cosine(packed, hf_alone(model, ids)) >= 0.999


def test_the_encoder_shares_the_hf_parameters():
    model = _tiny_model()
    assert {id(p) for p in model.parameters()} == {id(p) for p in PackedModernBertEncoder(model).parameters()}
    with pytest.raises(ValueError, match="PackedModernBertEncoder does not support LlamaModel"):
        PackedModernBertEncoder(transformers.LlamaModel(transformers.LlamaConfig(
            vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)))


TEXTS = ["a short one", "The quick brown fox jumps over the lazy dog near the river bank, " * 8, "x"]


def test_the_engine_runs_a_saved_modernbert_packed_and_embeds_as_the_padded_runner(tmp_path):
    # Given a random ModernBERT saved with MiniLM's tokenizer (vocabulary 30522)
    config = _config(vocab_size=30522)
    save_random_model(tmp_path, transformers.ModernBertModel, config)
    # When the engine loads it with the packed path on and off
    packed = PoolingEngine.from_pretrained(str(tmp_path), dtype="float32")
    padded = PoolingEngine.from_pretrained(str(tmp_path), dtype="float32", config=EngineConfig(packed=False))
    # Then the packed runner is chosen, and its embeddings are the padded runner's
    assert isinstance(packed.runner, PackedRunner) and isinstance(padded.runner, ModelRunner)
    np.testing.assert_allclose(packed.embed(TEXTS), padded.embed(TEXTS), atol=1e-5)
