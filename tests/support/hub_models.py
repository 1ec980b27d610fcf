"""Tiny seeded random-weight models of each family users name by Hub id, saved by sentence-transformers
itself (a real ``SentenceTransformer`` of Transformer + Pooling (+ Dense) (+ Normalize), with the prompts
the family's real model has, ``save()``d: the files are exactly what sentence-transformers writes) and
published into a Hugging Face Hub cache (``support.hub_cache``) under a given ``HF_HOME``.

Every family shares MiniLM's (BERT) tokenizer: the mechanics (prompts, pooling, windows) are the same
with any tokenizer, and real models prove parity. Hidden size 32, 2 layers, 128 positions.

    commit = publish_family(hf_home, "qwen3-embed")            # test-org/qwen3-embed, refs/main -> commit
    snapshot = snapshot_dir(hf_home, "test-org/qwen3-embed")    # .../snapshots/<commit>
    publish_family(hf_home, "qwen3-embed", seed=1, tags=("v2",))  # a second commit; main and v2 move to it
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from support.hub_cache import hf_hub_repo, publish
from support.random_models import MINILM_DIR, TOKENIZER_FILES

ORG = "test-org"
_SIZES = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              pad_token_id=0, initializer_range=0.2)
_DECODER = dict(num_key_value_heads=2, head_dim=8, max_position_embeddings=128)
QWEN3_QUERY = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


@dataclass(frozen=True)
class Family:
    """How one family's test model is built: its transformers config (class name and values) and the
    sentence-transformers modules and settings of the real model it stands for."""

    name: str  # the repo is test-org/<name>
    config_class: str
    config: dict
    pooling: str  # sentence-transformers' pooling_mode
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    include_prompt: bool = True
    dense: tuple[int, ...] = ()  # output sizes of Dense modules (no bias, identity), in order
    normalize: bool = True
    max_seq_length: int = 128
    legacy_lower_case: bool = False  # a cased tokenizer and sentence_bert_config.json's do_lower_case (pre-5 saves)

    @property
    def repo_id(self) -> str:
        return f"{ORG}/{self.name}"

    @property
    def hidden_size(self) -> int:
        return int({**_SIZES, **self.config}["hidden_size"])


E5_PROMPTS = {"query": "query: ", "passage": "passage: "}
FAMILIES = {family.name: family for family in (
    Family("bert-e5", "BertConfig", dict(max_position_embeddings=128), "mean", E5_PROMPTS),
    Family("roberta-cls", "RobertaConfig", dict(max_position_embeddings=130, type_vocab_size=1), "cls", normalize=False),
    Family("xlmr-e5", "XLMRobertaConfig", dict(max_position_embeddings=130, type_vocab_size=1), "mean", E5_PROMPTS),
    Family("mpnet-base", "MPNetConfig", dict(max_position_embeddings=130), "mean"),
    Family("modernbert-nomic", "ModernBertConfig",
           dict(max_position_embeddings=128, cls_token_id=101, sep_token_id=102, bos_token_id=101, eos_token_id=102),
           "mean", {"query": "search_query: ", "document": "search_document: "}),
    Family("qwen3-embed", "Qwen3Config", _DECODER, "lasttoken", {"query": QWEN3_QUERY, "document": ""}),
    Family("mistral-sgpt", "MistralConfig", _DECODER, "weightedmean", {"query": "Query: "}, normalize=False),
    Family("gemma3-embed", "Gemma3TextConfig", dict(_DECODER, use_bidirectional_attention=True, sliding_window=512),
           "mean", {"query": "task: search result | query: ", "document": "title: none | text: "}, dense=(64, 32)),
    # INSTRUCTOR-style: the instruction conditions the text but is left out of the mean; a default prompt
    Family("bert-instructor", "BertConfig", dict(max_position_embeddings=128), "mean",
           {"query": "Represent the question for retrieving documents: ", "document": "Represent the document: "},
           default_prompt_name="document", include_prompt=False),
    Family("bert-cased-lower", "BertConfig", dict(max_position_embeddings=128), "cls", legacy_lower_case=True),
)}


def publish_family(hf_home: Path, name: str, *, seed: int = 0, tags: tuple[str, ...] = (),
                   branch: str | None = "main") -> str:
    """Build ``FAMILIES[name]`` with weights from ``seed`` and publish it as a commit of its repo;
    ``branch`` (and ``tags``) point at it. Returns the commit (40 hex digits)."""
    family = FAMILIES[name]
    with tempfile.TemporaryDirectory() as scratch:
        saved = build_family(family, Path(scratch), seed)
        return publish(hf_home, family.repo_id, saved, seed=str(seed), tags=tags, branch=branch)


def build_family(family: Family, scratch: Path, seed: int = 0) -> Path:
    """``family``'s model saved by sentence-transformers in ``scratch``/saved; returns that folder."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models  # 6.x's home of Pooling, Dense, ...

    base = scratch / "hf"
    _save_base_model(family, base, seed)
    transformer = models.Transformer(str(base), max_seq_length=family.max_seq_length)
    modules = [transformer, models.Pooling(family.hidden_size, pooling_mode=family.pooling,
                                           include_prompt=family.include_prompt)]
    size = family.hidden_size
    torch.manual_seed(seed + 1)
    for out in family.dense:
        modules.append(models.Dense(size, out, bias=False, activation_function=torch.nn.Identity()))
        size = out
    if family.normalize:
        modules.append(models.Normalize())
    model = SentenceTransformer(modules=modules, device="cpu", prompts=family.prompts or None,
                                default_prompt_name=family.default_prompt_name)
    saved = scratch / "saved"
    model.save(str(saved), create_model_card=False)
    if family.legacy_lower_case:  # as saved before 5.x: the cased tokenizer, lower-casing named beside it
        for name in TOKENIZER_FILES:
            shutil.copy(base / name, saved / name)
        (saved / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": family.max_seq_length,
                                                                     "do_lower_case": True}))
    return saved


def _save_base_model(family: Family, path: Path, seed: int) -> None:
    import transformers

    config = getattr(transformers, family.config_class)(**{**_SIZES, **family.config})
    torch.manual_seed(seed)
    transformers.AutoModel.from_config(config).eval().save_pretrained(path)
    for name in TOKENIZER_FILES:
        shutil.copy(MINILM_DIR / name, path / name)
    if family.legacy_lower_case:
        _make_cased(path)


def _make_cased(path: Path) -> None:
    """MiniLM's tokenizer made cased: its normalizer no longer lower-cases (nor strips accents)."""
    tokenizer = json.loads((path / "tokenizer.json").read_text())
    tokenizer["normalizer"].update(lowercase=False, strip_accents=False)
    (path / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))


def snapshot_dir(hf_home: Path, repo_id: str, ref: str = "main") -> Path:
    """The snapshot folder ``ref`` (a branch or tag) of ``repo_id`` points at."""
    repo = hf_hub_repo(hf_home, repo_id)
    return repo / "snapshots" / (repo / "refs" / ref).read_text().strip()


def publish_bin_only(hf_home: Path, repo_id: str = f"{ORG}/bert-pickled", seed: int = 0) -> str:
    """A BERT repo whose weights are only ``pytorch_model.bin`` (pickled), with sentence-transformers files."""
    with tempfile.TemporaryDirectory() as scratch:
        saved = build_family(FAMILIES["bert-e5"], Path(scratch), seed)
        weights = _load_safetensors(saved / "model.safetensors")
        (saved / "model.safetensors").unlink()
        torch.save(weights, saved / "pytorch_model.bin")
        return publish(hf_home, repo_id, saved, seed=f"bin{seed}")


def publish_remote_code(hf_home: Path, repo_id: str = f"{ORG}/bert-custom-code", seed: int = 0) -> str:
    """A BERT repo whose config.json sends AutoModel to the repository's own code (``auto_map``:
    ``trust_remote_code``), with that code beside it."""
    with tempfile.TemporaryDirectory() as scratch:
        saved = build_family(FAMILIES["bert-e5"], Path(scratch), seed)
        config = json.loads((saved / "config.json").read_text())
        config["auto_map"] = {"AutoConfig": "modeling_custom.CustomConfig", "AutoModel": "modeling_custom.CustomModel"}
        (saved / "config.json").write_text(json.dumps(config))
        (saved / "modeling_custom.py").write_text("raise RuntimeError('a test repository's code must never run')\n")
        return publish(hf_home, repo_id, saved, seed=f"code{seed}")


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))
