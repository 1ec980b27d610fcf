"""What a model directory declares: architecture, window, pooling, head and prompts.

Read from plain JSON files (HF ``config.json``, and the sentence-transformers files through
``st_config.py``); no torch here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from poolq.engine.request import PoolingTask
from poolq.engine.st_config import POOLING_MODES, ModelSpecError, SentenceTransformersConfig, read_json_object, read_st_config

__all__ = ["M3_FILES", "ModelKind", "ModelSpec", "ModelSpecError", "PoolingType", "PromptError", "read_model_spec",
           "resolve_prompt"]


class PoolingType(str, Enum):
    CLS = "CLS"
    LAST = "LAST"
    MEAN = "MEAN"
    WEIGHTEDMEAN = "WEIGHTEDMEAN"  # position-weighted mean (SGPT): token i of a sequence weighs i + 1


class PromptError(ValueError):
    """A prompt request the model cannot follow: a prompt name it does not have, or both a name and a text."""


class ModelKind(str, Enum):
    """Which HF head class the weights are loaded with; it decides the tasks the model serves."""

    ENCODER = "encoder"  # AutoModel: embed, token_embed (decoders too: LAST pooling)
    SEQUENCE_CLASSIFIER = "sequence_classifier"  # classify (1 label: cross-encoder scores)
    TOKEN_CLASSIFIER = "token_classifier"  # token_classify (and STEP)
    SPARSE_ENCODER = "sparse_encoder"  # masked LM as SPLADE: sparse_embed
    # BGE-M3's layout (FlagEmbedding): an encoder plus sparse_linear.pt and colbert_linear.pt beside
    # it; dense, sparse and multi-vector outputs from one forward pass
    M3_ENCODER = "m3_encoder"

    @property
    def tasks(self) -> tuple[PoolingTask, ...]:
        """The pooling tasks a model of this kind serves (its dispatcher is built for exactly these)."""
        return _TASKS_BY_KIND[self]


_TASKS_BY_KIND = {
    ModelKind.ENCODER: (PoolingTask.EMBED, PoolingTask.TOKEN_EMBED),
    ModelKind.SEQUENCE_CLASSIFIER: (PoolingTask.CLASSIFY,),
    ModelKind.TOKEN_CLASSIFIER: (PoolingTask.TOKEN_CLASSIFY,),
    ModelKind.SPARSE_ENCODER: (PoolingTask.SPARSE_EMBED,),
    ModelKind.M3_ENCODER: (PoolingTask.EMBED, PoolingTask.SPARSE_EMBED, PoolingTask.TOKEN_EMBED),
}
M3_FILES = ("sparse_linear.pt", "colbert_linear.pt")


def _model_kind(model_dir: Path, architecture: str, st: SentenceTransformersConfig) -> ModelKind:
    if all((model_dir / name).exists() for name in M3_FILES):
        return ModelKind.M3_ENCODER
    if architecture.endswith("ForSequenceClassification"):
        return ModelKind.SEQUENCE_CLASSIFIER
    if architecture.endswith("ForTokenClassification"):
        return ModelKind.TOKEN_CLASSIFIER
    if st.sparse or (architecture.endswith("ForMaskedLM") and st.pooling is None):
        return ModelKind.SPARSE_ENCODER
    # Encoders, and decoders (*ForCausalLM): a pooling model whatever its LM head says.
    return ModelKind.ENCODER


@dataclass(frozen=True)
class ModelSpec:
    """Everything the engine needs to know about a model before loading its weights."""

    path: Path
    architecture: str
    hidden_size: int
    window_tokens: int  # the default window: sentence-transformers' max_seq_length, else the position limit
    max_position_tokens: int  # the hard limit of the position embeddings
    pooling: PoolingType
    normalize: bool
    is_causal: bool
    kind: ModelKind = ModelKind.ENCODER
    num_labels: int = 0
    problem_type: str | None = None
    activation_fn: str | None = None  # sentence-transformers' classifier activation, if named
    dense_dirs: tuple[str, ...] = ()  # sentence-transformers Dense (projector) modules, in order
    sparse_reduce: str = "max"  # SPLADE: max or sum over tokens
    labels: tuple[str, ...] = ()  # classifiers: label names by index (config id2label, else LABEL_i)
    include_prompt: bool = True  # False: pooling leaves out the prompt's tokens (sentence-transformers' Pooling)
    # Prompt names -> texts put before a text, as sentence-transformers holds them: the model's own
    # (config_sentence_transformers.json) and the empty "query" and "document" every SentenceTransformer knows
    prompts: dict[str, str] = field(default_factory=dict, hash=False)
    default_prompt_name: str | None = None  # the prompt used when a request names none
    similarity_fn_name: str | None = None  # as saved (cosine, dot, euclidean, manhattan); None: not named (cosine)
    # sentence-transformers' truncate_dim, if saved: embed vectors are cut to it when a request names no
    # dimensions (engine/pooling/model_truncation.py)
    truncate_dim: int | None = None

    @property
    def multi_label(self) -> bool:
        return self.problem_type == "multi_label_classification"


def resolve_prompt(spec: ModelSpec, prompt_name: str | None = None, prompt: str | None = None) -> str:
    """The text put before every text of a request, as sentence-transformers resolves it: a literal
    ``prompt`` (``""`` for none at all), else the model's prompt ``prompt_name``, else its default
    prompt, else none (``""``). Raises PromptError for an unknown name, or for both a name and a text."""
    if prompt is not None and prompt_name is not None:
        raise PromptError("give a prompt or a prompt_name, not both")
    if prompt is not None:
        return prompt
    name = prompt_name if prompt_name is not None else spec.default_prompt_name
    if name is None:
        return ""
    if name not in spec.prompts:
        known = ", ".join(repr(known) for known in spec.prompts) or "none"
        raise PromptError(f"prompt_name {name!r} is not one of this model's prompts ({known})")
    return spec.prompts[name]


def read_model_spec(path: str | Path, *, is_causal: bool | None = None) -> ModelSpec:
    """Read a local model directory's declarations. Never touches the network.

    Without torch, a decoder is recognized by a ``*ForCausalLM`` architecture; the loader,
    which has transformers' model tables at hand, passes ``is_causal`` for the others
    (e.g. ``LlamaForSequenceClassification``). A decoder made bidirectional
    (``use_bidirectional_attention``, EmbeddingGemma) is no causal model.
    """
    model_dir = Path(path)
    config = read_json_object(model_dir / "config.json", required=True)
    architecture = (config.get("architectures") or [config.get("model_type", "unknown")])[0]
    if is_causal is None:
        is_causal = architecture.endswith("ForCausalLM") or bool(config.get("is_decoder"))
    is_causal = is_causal and not config.get("use_bidirectional_attention")
    max_positions = _position_limit(config)
    st = read_st_config(model_dir)
    pooling = PoolingType(POOLING_MODES[st.pooling]) if st.pooling else (PoolingType.LAST if is_causal else PoolingType.CLS)
    kind = _model_kind(model_dir, architecture, st)
    num_labels = int(config.get("num_labels") or len(config.get("id2label") or {}) or 0)
    return ModelSpec(
        path=model_dir,
        architecture=architecture,
        hidden_size=_width(config),
        window_tokens=min(st.max_seq_length or max_positions, max_positions),
        max_position_tokens=max_positions,
        pooling=pooling,
        # BGE-M3 normalizes its dense vectors whatever sentence-transformers files sit beside it.
        normalize=kind is ModelKind.M3_ENCODER or st.normalize,
        is_causal=is_causal,
        kind=kind,
        num_labels=num_labels,
        problem_type=config.get("problem_type"),
        activation_fn=st.activation_fn or (config.get("sentence_transformers") or {}).get("activation_fn"),
        dense_dirs=st.dense_dirs,
        sparse_reduce=st.sparse_reduce,
        labels=_label_names(config, num_labels) if kind in (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.TOKEN_CLASSIFIER) else (),
        include_prompt=st.include_prompt,
        prompts=st.prompts,
        default_prompt_name=st.default_prompt_name,
        similarity_fn_name=st.similarity_fn_name,
        truncate_dim=st.truncate_dim,
    )


def _label_names(config: dict, num_labels: int) -> tuple[str, ...]:
    """``id2label`` in index order; a label it does not name is ``LABEL_i`` (transformers' default)."""
    named = config.get("id2label") or {}
    if not isinstance(named, dict):
        raise ModelSpecError("config.json: id2label is not an object")
    by_index = {int(index): str(name) for index, name in named.items() if str(index).lstrip("-").isdigit()}
    return tuple(by_index.get(index, f"LABEL_{index}") for index in range(num_labels))


# The keys a family saves its width under, in the order read: most say hidden_size; DistilBERT says dim,
# T5-style encoders d_model.
_WIDTH_KEYS = ("hidden_size", "dim", "d_model")


def _width(config: dict) -> int:
    for key in _WIDTH_KEYS:
        if config.get(key) is not None:
            return int(config[key])
    raise ModelSpecError(f"config.json has none of {', '.join(_WIDTH_KEYS)}; cannot tell the model's width")


def _position_limit(config: dict) -> int:
    limit = config.get("max_position_embeddings")
    if limit is None:
        raise ModelSpecError("config.json has no max_position_embeddings; cannot tell the model's window")
    # RoBERTa-style models (and MPNet) reserve padding_idx + 1 positions at the start of the table.
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert", "mpnet"):
        limit -= int(config.get("pad_token_id", 1)) + 1
    return int(limit)
