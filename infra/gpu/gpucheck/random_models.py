"""Tiny random-weight models of four families, built at run time from transformers' config classes
with a fixed seed and saved in the real checkpoint layout, with MiniLM's (BERT) tokenizer beside them.

The GPU check's matrix runs them: no weights travel to the GPU machine, and the same seed gives the
same model on both sides of a comparison (it loads one saved directory twice anyway). Built the way
``tests/support/random_models.py`` builds the test suite's (which the check cannot import: ``tests/``
is not on the GPU machine's path as a package).

Windows are small (64 tokens) so that a few hundred words make a long document of several windows.
Weights are drawn ten times wider than transformers' default (``initializer_range`` 0.2, not 0.02):
at the default every text's CLS state is nearly the same vector (raw cosine 0.99999 between texts)
and every class probability ~1/num_labels, so what tells texts apart drowns in bf16's rounding and
no tolerance could tell a wrong row from a right one. At 0.2 texts' vectors differ (raw cosine ~0.9)
and probabilities spread.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
VOCAB = 30522  # MiniLM's (BERT uncased) vocabulary, shared by every family here
WINDOW = 64
HIDDEN = 32
INITIALIZER_RANGE = 0.2
NUM_LABELS = {"classifier": 3, "cross_encoder": 1, "token_classifier": 5}


class Family(str, Enum):
    BERT = "bert"  # encoders load straight from the checkpoint
    XLMR = "xlmr"  # RoBERTa's position offset; BGE-M3's base
    MPNET = "mpnet"  # a relative position bias in attention; 2 positions reserved
    # Llama: causal, LAST pooling, grouped K/V heads. (Not Qwen2: transformers 5 gives
    # a qwen2 config its own tokenizer class whatever tokenizer_config.json names, and that class
    # splits text into characters with MiniLM's vocabulary.)
    DECODER = "decoder"


class Head(str, Enum):
    MEAN_ENCODER = "mean_encoder"  # AutoModel + sentence-transformers MEAN pooling files
    ENCODER = "encoder"  # AutoModel alone: CLS pooling (LAST for the decoder)
    CLASSIFIER = "classifier"  # *ForSequenceClassification, 3 labels, softmax
    CROSS_ENCODER = "cross_encoder"  # *ForSequenceClassification, 1 label, sigmoid
    TOKEN_CLASSIFIER = "token_classifier"  # *ForTokenClassification, 5 labels
    MASKED_LM = "masked_lm"  # *ForMaskedLM: SPLADE (sparse_embed)
    M3 = "m3"  # BGE-M3's layout: encoder + sparse_linear.pt + colbert_linear.pt (XLM-R only)


# transformers class name per family and head (a missing pair is a model that family does not have)
_CLASSES = {
    Family.BERT: {Head.MEAN_ENCODER: "BertModel", Head.ENCODER: "BertModel", Head.CLASSIFIER: "BertForSequenceClassification",
                  Head.CROSS_ENCODER: "BertForSequenceClassification", Head.TOKEN_CLASSIFIER: "BertForTokenClassification",
                  Head.MASKED_LM: "BertForMaskedLM"},
    Family.XLMR: {Head.MEAN_ENCODER: "XLMRobertaModel", Head.ENCODER: "XLMRobertaModel",
                  Head.CLASSIFIER: "XLMRobertaForSequenceClassification",
                  Head.CROSS_ENCODER: "XLMRobertaForSequenceClassification",
                  Head.TOKEN_CLASSIFIER: "XLMRobertaForTokenClassification", Head.MASKED_LM: "XLMRobertaForMaskedLM",
                  Head.M3: "XLMRobertaModel"},
    Family.MPNET: {Head.MEAN_ENCODER: "MPNetModel", Head.ENCODER: "MPNetModel", Head.CLASSIFIER: "MPNetForSequenceClassification",
                   Head.CROSS_ENCODER: "MPNetForSequenceClassification", Head.TOKEN_CLASSIFIER: "MPNetForTokenClassification",
                   Head.MASKED_LM: "MPNetForMaskedLM"},
    Family.DECODER: {Head.ENCODER: "LlamaModel", Head.CLASSIFIER: "LlamaForSequenceClassification",
                     Head.CROSS_ENCODER: "LlamaForSequenceClassification", Head.TOKEN_CLASSIFIER: "LlamaForTokenClassification"},
}


@dataclass(frozen=True)
class ModelKey:
    family: Family
    head: Head

    @property
    def name(self) -> str:
        return f"{self.family.value}-{self.head.value}"


def has_model(key: ModelKey) -> bool:
    return key.head in _CLASSES[key.family]


def family_config(family: Family, num_labels: int = 2):
    """The tiny config of ``family``: hidden 32, 2 layers, 4 heads, a 64-token window."""
    import transformers

    shared: dict[str, Any] = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, num_labels=num_labels, pad_token_id=0,
                                  initializer_range=INITIALIZER_RANGE)
    if family is Family.BERT:
        return transformers.BertConfig(max_position_embeddings=WINDOW, **shared)
    if family is Family.XLMR:  # RoBERTa positions start after the pad id: pad 0 reserves 1
        return transformers.XLMRobertaConfig(max_position_embeddings=WINDOW + 1, type_vocab_size=2, **shared)
    if family is Family.MPNET:  # as the real checkpoints: 2 positions reserved, the window set by sentence-transformers
        return transformers.MPNetConfig(max_position_embeddings=WINDOW + 2, **shared)
    return transformers.LlamaConfig(max_position_embeddings=WINDOW, num_key_value_heads=2, **shared)


def build_model(directory: Path, key: ModelKey, tokenizer_dir: Path, seed: int = 0) -> Path:
    """Save the seeded random model ``key`` under ``directory`` (made if missing); returns it."""
    import torch
    import transformers

    if not has_model(key):
        raise ValueError(f"no {key.head.value} model in the {key.family.value} family")
    directory.mkdir(parents=True, exist_ok=True)
    config = family_config(key.family, NUM_LABELS.get(key.head.value, 2))
    torch.manual_seed(seed)
    getattr(transformers, _CLASSES[key.family][key.head])(config).eval().save_pretrained(directory)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, directory / name)
    if key.family is Family.MPNET:
        _write_json(directory / "sentence_bert_config.json", {"max_seq_length": WINDOW})
    if key.head is Head.MEAN_ENCODER:
        _write_mean_pooling(directory)
    if key.head is Head.M3:
        _write_m3_layers(directory, seed)
    return directory


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def _write_mean_pooling(directory: Path) -> None:
    """sentence-transformers' Transformer + Pooling(mean) modules: the engine pools MEAN (Triton on CUDA)."""
    _write_json(directory / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
    _write_json(directory / "1_Pooling" / "config.json", {"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True})


def _write_m3_layers(directory: Path, seed: int, colbert_dim: int = 24) -> None:
    """BGE-M3's two extra layers as state dicts beside the encoder (FlagEmbedding's layout)."""
    import torch

    torch.manual_seed(seed + 1)
    torch.save(torch.nn.Linear(HIDDEN, 1).state_dict(), directory / "sparse_linear.pt")
    torch.save(torch.nn.Linear(HIDDEN, colbert_dim).state_dict(), directory / "colbert_linear.pt")
