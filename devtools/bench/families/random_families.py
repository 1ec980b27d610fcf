"""Random-weight models of the families users pick, at their real layer shapes, saved as
sentence-transformers saves them, with a tokenizer trained on the demo corpus, and long documents cut
from that corpus: what ``poolq bench families`` (families.py) measures."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

WINDOW = 8192
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4, in this order


@dataclass(frozen=True)
class Family:
    """One model to build: its transformers config class and values, and its sentence-transformers pooling."""

    name: str
    config_class: str
    config: dict
    pooling: str

    def with_config(self, **overrides) -> "Family":
        return replace(self, config={**self.config, **overrides})

    @property
    def layers(self) -> int:
        return self.config["num_hidden_layers"]


_IDS = dict(pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
# ModernBERT-base's shapes (12 layers, every 3rd global); Qwen3-Embedding-0.6B's (28 layers). The vocabulary is
# the tokenizer's (train_tokenizer), far smaller than the real ones: the embedding table is no part of the race.
MODERNBERT = Family("ModernBERT", "ModernBertConfig", dict(
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1152,
    global_attn_every_n_layers=3, local_attention=128, max_position_embeddings=WINDOW, **_IDS), "mean")
QWEN3 = Family("Qwen3", "Qwen3Config", dict(
    hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    intermediate_size=3072, max_position_embeddings=WINDOW, pad_token_id=0, bos_token_id=2, eos_token_id=3), "lasttoken")
FAMILIES = {"modernbert": MODERNBERT, "qwen3": QWEN3}

# Each size: per family, what replaces the real shapes. "tiny" keeps each family's kind of attention (local
# windows, grouped K/V heads) at a size that builds and runs in a second: a smoke run, its speeds mean nothing.
_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
SIZES: dict[str, dict[str, dict]] = {
    "realistic": {"modernbert": {}, "qwen3": {}},
    "tiny": {"modernbert": dict(_TINY, local_attention=8), "qwen3": dict(_TINY, num_key_value_heads=2, head_dim=16)},
}


def sized_family(name: str, size: str = "realistic", layers: int | None = None) -> Family:
    """Family ``name`` at ``size``, with ``layers`` layers where given (fewer: a shorter run, each layer the same work)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    if layers is not None and layers < 1:
        raise ValueError(f"{name}: layers must be at least 1, got {layers}")
    family = FAMILIES[name].with_config(**SIZES[size][name])
    return family if layers is None else family.with_config(num_hidden_layers=layers)


def train_tokenizer(directory: Path, vocab_size: int) -> None:
    """A lower-casing WordPiece tokenizer of ``vocab_size`` trained on the demo corpus, saved as transformers saves one."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(corpus_texts(), trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(directory)


def corpus_texts() -> list[str]:
    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    return [document["text"] for document in load_sample_corpus()]


def build_model(family: Family, tokenizer_dir: Path, directory: Path, seed: int = 0) -> Path:
    """``family`` with weights from ``seed`` and the tokenizer of ``tokenizer_dir``, saved by sentence-transformers."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    transformers.utils.logging.disable_progress_bar()  # saving and loading bars would bury the rounds
    base = directory / "hf"
    vocab_size = len(transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    config = getattr(transformers, family.config_class)(vocab_size=vocab_size, **family.config)
    torch.manual_seed(seed)
    transformers.AutoModel.from_config(config).eval().save_pretrained(base)
    transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(base)
    transformer = modules.Transformer(str(base), max_seq_length=WINDOW)
    pooling = modules.Pooling(config.hidden_size, pooling_mode=family.pooling)
    saved = directory / "saved"
    model = SentenceTransformer(modules=[transformer, pooling, modules.Normalize()], device="cpu")
    model.save(str(saved), create_model_card=False)
    return saved


def documents(tokenizer, lengths: tuple[int, ...], seed: int = 0) -> list[str]:
    """One text per length, cut at a token boundary from the corpus (repeated) at a random start,
    so that it tokenizes to about that many tokens, ``[CLS]`` and ``[SEP]`` included."""
    stream = "\n\n".join(corpus_texts())
    stream = "\n\n".join([stream] * (2 + max(lengths) * 5 // len(stream)))  # ~5 characters a token, with room
    offsets = tokenizer(stream, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    rng = np.random.default_rng(seed)
    texts = []
    for length in lengths:
        start = int(rng.integers(0, len(offsets) - length))
        texts.append(stream[offsets[start][0]: offsets[start + length - 3][1]])
    return texts
