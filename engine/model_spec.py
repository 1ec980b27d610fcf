"""What a model directory declares: architecture, window, pooling and head.

Read from plain JSON files (HF ``config.json`` and the sentence-transformers files
``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``); no torch here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from poolq.engine.request import PoolingTask


class ModelSpecError(ValueError):
    """The model directory is missing a file or declares something the engine cannot run."""


class PoolingType(str, Enum):
    CLS = "CLS"
    LAST = "LAST"
    MEAN = "MEAN"


# sentence-transformers pooling-config keys -> our pooling type.
_ST_POOLING_MODES = {
    "pooling_mode_cls_token": PoolingType.CLS,
    "pooling_mode_mean_tokens": PoolingType.MEAN,
    "pooling_mode_lasttoken": PoolingType.LAST,
}
_ST_NORMALIZE = "sentence_transformers.models.Normalize"
_ST_POOLING = "sentence_transformers.models.Pooling"
_ST_DENSE = "sentence_transformers.models.Dense"
_ST_SPLADE = "sentence_transformers.sparse_encoder.models.SpladePooling"


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


def _model_kind(model_dir: Path, architecture: str, modules: list[dict]) -> ModelKind:
    types = {module.get("type") for module in modules}
    if all((model_dir / name).exists() for name in M3_FILES):
        return ModelKind.M3_ENCODER
    if architecture.endswith("ForSequenceClassification"):
        return ModelKind.SEQUENCE_CLASSIFIER
    if architecture.endswith("ForTokenClassification"):
        return ModelKind.TOKEN_CLASSIFIER
    if _ST_SPLADE in types or (architecture.endswith("ForMaskedLM") and _ST_POOLING not in types):
        return ModelKind.SPARSE_ENCODER
    # Encoders, and decoders (*ForCausalLM): a pooling model whatever its LM head says.
    return ModelKind.ENCODER


@dataclass(frozen=True)
class ModelSpec:
    """Everything the engine needs to know about a model before loading its weights."""

    path: Path
    architecture: str
    hidden_size: int
    window_tokens: int  # the default window: ST max_seq_length, else the position limit
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

    @property
    def multi_label(self) -> bool:
        return self.problem_type == "multi_label_classification"


def read_model_spec(path: str | Path, *, is_causal: bool | None = None) -> ModelSpec:
    """Read a local model directory's declarations. Never touches the network.

    Without torch, a decoder is recognized by a ``*ForCausalLM`` architecture; the loader,
    which has transformers' model tables at hand, passes ``is_causal`` for the others
    (e.g. ``LlamaForSequenceClassification``).
    """
    model_dir = Path(path)
    config = _read_json_object(model_dir / "config.json", required=True)
    architecture = (config.get("architectures") or [config.get("model_type", "unknown")])[0]
    if is_causal is None:
        is_causal = architecture.endswith("ForCausalLM") or bool(config.get("is_decoder"))
    max_positions = _position_limit(config)
    st_config = _read_json_object(model_dir / "sentence_bert_config.json", required=False)
    window = int(st_config.get("max_seq_length") or max_positions)
    modules = _read_json_modules(model_dir / "modules.json")
    pooling = _pooling_from_modules(model_dir, modules) or (PoolingType.LAST if is_causal else PoolingType.CLS)
    kind = _model_kind(model_dir, architecture, modules)
    # BGE-M3 normalizes its dense vectors whatever sentence-transformers files sit beside it.
    normalize = kind is ModelKind.M3_ENCODER or any(module.get("type") == _ST_NORMALIZE for module in modules)
    num_labels = int(config.get("num_labels") or len(config.get("id2label") or {}) or 0)
    return ModelSpec(
        path=model_dir,
        architecture=architecture,
        hidden_size=int(config["hidden_size"]),
        window_tokens=min(window, max_positions),
        max_position_tokens=max_positions,
        pooling=pooling,
        normalize=normalize,
        is_causal=is_causal,
        kind=kind,
        num_labels=num_labels,
        problem_type=config.get("problem_type"),
        activation_fn=(config.get("sentence_transformers") or {}).get("activation_fn"),
        dense_dirs=tuple(m["path"] for m in modules if m.get("type") == _ST_DENSE),
        sparse_reduce=_sparse_reduce(model_dir, modules),
        labels=_label_names(config, num_labels) if kind in (ModelKind.SEQUENCE_CLASSIFIER, ModelKind.TOKEN_CLASSIFIER) else (),
    )


def _label_names(config: dict, num_labels: int) -> tuple[str, ...]:
    """``id2label`` in index order; a label it does not name is ``LABEL_i`` (transformers' default)."""
    named = config.get("id2label") or {}
    if not isinstance(named, dict):
        raise ModelSpecError("config.json: id2label is not an object")
    by_index = {int(index): str(name) for index, name in named.items() if str(index).lstrip("-").isdigit()}
    return tuple(by_index.get(index, f"LABEL_{index}") for index in range(num_labels))


def _sparse_reduce(model_dir: Path, modules: list[dict]) -> str:
    for module in modules:
        if module.get("type") == _ST_SPLADE:
            splade_config = _read_json_object(model_dir / module["path"] / "config.json", required=False)
            strategy = splade_config.get("pooling_strategy", "max")
            if strategy not in ("max", "sum"):
                raise ModelSpecError(f"{model_dir / module['path']}: unsupported SPLADE pooling_strategy {strategy!r}")
            return strategy
    return "max"


def _position_limit(config: dict) -> int:
    limit = config.get("max_position_embeddings")
    if limit is None:
        raise ModelSpecError("config.json has no max_position_embeddings; cannot tell the model's window")
    # RoBERTa-style models reserve padding_idx + 1 positions at the start of the table.
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        limit -= int(config.get("pad_token_id", 1)) + 1
    return int(limit)


def _pooling_from_modules(model_dir: Path, modules: list[dict]) -> PoolingType | None:
    for module in modules:
        if module.get("type") != _ST_POOLING:
            continue
        pooling_config = _read_json_object(model_dir / module["path"] / "config.json", required=True)
        enabled = [kind for key, kind in _ST_POOLING_MODES.items() if pooling_config.get(key)]
        if len(enabled) != 1:
            flags = sorted(key for key, value in pooling_config.items() if key.startswith("pooling_mode") and value)
            raise ModelSpecError(f"{model_dir / module['path']}: unsupported pooling modes {flags}")
        return enabled[0]
    return None


def _read_json_object(path: Path, *, required: bool) -> dict:
    """A JSON file that must hold an object; a missing optional file reads as ``{}``."""
    data = _read_json(path, required=required)
    if not isinstance(data, dict):
        raise ModelSpecError(f"{path} does not hold a JSON object")
    return data


def _read_json_modules(path: Path) -> list[dict]:
    """sentence-transformers ``modules.json``: a list of module objects; missing or empty reads as ``[]``."""
    data = _read_json(path, required=False) or []
    if not isinstance(data, list) or not all(isinstance(module, dict) for module in data):
        raise ModelSpecError(f"{path} does not hold a JSON list of module objects")
    return data


def _read_json(path: Path, *, required: bool) -> dict | list:
    if not path.exists():
        if required:
            raise ModelSpecError(f"{path} is missing")
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelSpecError(f"{path} is not valid JSON: {exc}") from exc
