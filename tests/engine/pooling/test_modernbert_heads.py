"""ModernBERT's classifiers as transformers computes them: its prediction head (dense, activation, norm)
before the classifier, on the first token or the mean of the tokens as ``classifier_pooling`` says, and
on every token for token classification."""
import numpy as np
import pytest
import torch
from support.random_models import save_random_model

from poolq.engine import PoolingEngine

TEXTS = ["a fox in the snow at dawn", "rates rose again this quarter", "make the kernel with one job per core"]


def _config(**overrides):
    from transformers import ModernBertConfig

    return ModernBertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=128, pad_token_id=0, cls_token_id=101,
                            sep_token_id=102, bos_token_id=101, eos_token_id=102, initializer_range=0.2, **overrides)


def _reference(model, engine, texts):
    batch = engine.tokenizer.count_and_tokenize(texts)
    rows = []
    with torch.no_grad():
        for ids in batch:
            full = [engine.tokenizer.special_ids[0][0], *ids, engine.tokenizer.special_ids[1][0]]
            rows.append(model(input_ids=torch.tensor([full])).logits[0])
    return rows


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sequence_classification_equals_transformers(tmp_path, pooling):
    from transformers import ModernBertForSequenceClassification

    model = save_random_model(tmp_path, ModernBertForSequenceClassification,
                              _config(num_labels=3, classifier_pooling=pooling))
    engine = PoolingEngine.from_pretrained(tmp_path, dtype="float32")
    expected = torch.softmax(torch.stack(_reference(model, engine, TEXTS)), dim=-1).numpy()
    np.testing.assert_allclose(engine.classify(TEXTS), expected, atol=1e-5)


def test_token_classification_equals_transformers(tmp_path):
    from transformers import ModernBertForTokenClassification

    from poolq.engine import PoolingTask

    model = save_random_model(tmp_path, ModernBertForTokenClassification, _config(num_labels=4))
    engine = PoolingEngine.from_pretrained(tmp_path, dtype="float32")
    outputs = engine.encode(TEXTS, PoolingTask.TOKEN_CLASSIFY)
    for got, logits in zip(outputs, _reference(model, engine, TEXTS)):
        np.testing.assert_allclose(got, torch.softmax(logits, dim=-1).numpy(), atol=1e-5)
