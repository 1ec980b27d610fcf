"""A model directory's sentence-transformers configuration, read whole. No torch here.

sentence-transformers declares a model in ``modules.json`` (a Transformer, then Pooling, Dense,
Normalize, ...; each module's settings in ``<path>/config.json``), the Transformer's settings in
``sentence_bert_config.json`` (and, since 5.x, its window in ``tokenizer_config.json``), and the
model's own in ``config_sentence_transformers.json`` (prompts, the default prompt, the similarity
function, a default truncation). Both layouts are read: the module type names written before 5.x
(``sentence_transformers.models.Pooling``) and since (``...sentence_transformer.modules.pooling.Pooling``),
the Pooling config's ``pooling_mode_*`` flags and its ``pooling_mode``. What the engine would compute
differently from sentence-transformers is refused here, naming the file and the setting.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


class ModelSpecError(ValueError):
    """The model directory is missing a file or declares something the engine cannot run."""


# sentence-transformers' pooling modes -> the engine's (PoolingType values); others are refused.
POOLING_MODES = {"cls": "CLS", "mean": "MEAN", "lasttoken": "LAST", "weightedmean": "WEIGHTEDMEAN"}
# The Pooling config's legacy flags, in the order sentence-transformers concatenates them.
_LEGACY_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# Module classes by the last part of their type name (the same in both layouts).
_INPUT_MODULES = {"Transformer", "MLMTransformer"}
_MODULES_RUN = {"Pooling", "Dense", "Normalize", "SpladePooling"}
_MODULES_SKIPPED = {"Dropout"}  # nothing at inference
# Transformer outputs the engine pools: token states (feature-extraction), logits (the classifiers, SPLADE).
_TRANSFORMER_TASKS = {"feature-extraction", "sequence-classification", "fill-mask"}
# The file names sentence-transformers tries for the Transformer's settings, first found wins.
_TRANSFORMER_CONFIG_FILES = ("sentence_bert_config.json", "sentence_roberta_config.json",
                             "sentence_distilbert_config.json", "sentence_camembert_config.json",
                             "sentence_albert_config.json", "sentence_xlm-roberta_config.json", "sentence_xlnet_config.json")
# Every SentenceTransformer (and SparseEncoder) knows these prompt names, empty unless the model sets them.
DEFAULT_PROMPTS = {"query": "", "document": ""}


@dataclass(frozen=True)
class SentenceTransformersConfig:
    """What the sentence-transformers files declare; all defaults for a directory without them."""

    has_modules: bool = False  # modules.json lists modules (a sentence-transformers layout)
    pooling: str | None = None  # POOLING_MODES key of the Pooling module, None without one
    include_prompt: bool = True  # the Pooling module pools the prompt's tokens too
    dense_dirs: tuple[str, ...] = ()
    normalize: bool = False
    sparse: bool = False  # a SpladePooling module
    sparse_reduce: str = "max"
    max_seq_length: int | None = None  # the window sentence-transformers truncates to
    do_lower_case: bool = False  # sentence_bert_config.json's (saves since 5.x lower-case in the tokenizer itself)
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    similarity_fn_name: str | None = None
    truncate_dim: int | None = None  # the size encode() cuts embeddings to by default (Matryoshka)
    activation_fn: str | None = None  # a CrossEncoder's, as saved since 5.x


def read_st_config(model_dir: Path) -> SentenceTransformersConfig:
    """Read ``model_dir``'s sentence-transformers files; ModelSpecError names what cannot be run."""
    modules_path = model_dir / "modules.json"
    modules = read_json_modules(modules_path)
    kinds = [_module_kind(modules_path, index, module) for index, module in enumerate(modules)]
    pooling, include_prompt = _pooling(model_dir, modules, kinds)
    transformer = _transformer_settings(model_dir)
    model = read_json_object(model_dir / "config_sentence_transformers.json", required=False)
    prompts = _prompts(model_dir / "config_sentence_transformers.json", model)
    return SentenceTransformersConfig(
        has_modules=bool(modules),
        pooling=pooling,
        include_prompt=include_prompt,
        dense_dirs=tuple(_checked_dense(model_dir, m) for m, kind in zip(modules, kinds) if kind == "Dense"),
        normalize=any(_checked_normalize(model_dir, m) for m, kind in zip(modules, kinds) if kind == "Normalize"),
        sparse="SpladePooling" in kinds,
        sparse_reduce=next((_splade_reduce(model_dir, m) for m, kind in zip(modules, kinds) if kind == "SpladePooling"), "max"),
        max_seq_length=_window(model_dir, transformer) if modules else _positive(transformer, "max_seq_length"),
        do_lower_case=transformer.get("do_lower_case") is True,
        prompts=prompts,
        default_prompt_name=_default_prompt_name(model_dir / "config_sentence_transformers.json", model, prompts),
        similarity_fn_name=model.get("similarity_fn_name") if isinstance(model.get("similarity_fn_name"), str) else None,
        truncate_dim=_truncate_dim(model_dir / "config_sentence_transformers.json", model),
        activation_fn=model.get("activation_fn") if isinstance(model.get("activation_fn"), str) else None,
    )


def _module_kind(path: Path, index: int, module: dict) -> str:
    """The module's class name, for the modules the engine runs or skips; refuses the others."""
    kind = str(module.get("type", ""))
    name = kind.rpartition(".")[2]
    if not isinstance(module.get("path"), str):
        raise ModelSpecError(f"{path}: module {index} ({kind}) names no path")
    if not kind.startswith("sentence_transformers."):
        raise ModelSpecError(f"{path}: module {index} has type {kind!r}, not one of sentence-transformers' own; "
                             "poolq runs no code from a model directory")
    if name in _INPUT_MODULES and module["path"] != "":
        raise ModelSpecError(f"{path}: the {name} module is saved in {module['path']!r}; poolq reads models whose "
                             "Transformer sits at the top of the directory")
    if name not in _INPUT_MODULES | _MODULES_RUN | _MODULES_SKIPPED:
        runs = ", ".join(sorted(_INPUT_MODULES | _MODULES_RUN))
        raise ModelSpecError(f"{path}: module {index} ({kind}) is not one poolq computes; it runs {runs}")
    return name


def _pooling(model_dir: Path, modules: list[dict], kinds: list[str]) -> tuple[str | None, bool]:
    """The Pooling module's one mode and whether it pools the prompt's tokens."""
    found = [module for module, kind in zip(modules, kinds) if kind == "Pooling"]
    if not found:
        return None, True
    path = model_dir / found[0]["path"] / "config.json"
    config = read_json_object(path, required=True)
    modes = config.get("pooling_mode")
    if modes is None:  # the legacy flags; none set means mean, as sentence-transformers reads them
        modes = [mode for key, mode in _LEGACY_POOLING_FLAGS.items() if config.get(key)] or ["mean"]
    modes = [modes] if isinstance(modes, str) else modes
    if not isinstance(modes, list) or len(modes) != 1:
        raise ModelSpecError(f"{path}: pooling modes {modes} concatenate several poolings; poolq computes one of "
                             f"{', '.join(POOLING_MODES)}")
    if modes[0] not in POOLING_MODES:
        raise ModelSpecError(f"{path}: pooling mode {modes[0]!r} is not one poolq computes; it computes "
                             f"{', '.join(POOLING_MODES)}")
    include_prompt = config.get("include_prompt", True)
    if not isinstance(include_prompt, bool):
        raise ModelSpecError(f"{path}: include_prompt is {include_prompt!r}, not true or false")
    return modes[0], include_prompt


def _checked_dense(model_dir: Path, module: dict) -> str:
    path = model_dir / module["path"] / "config.json"
    config = read_json_object(path, required=True)
    if config.get("use_residual"):
        raise ModelSpecError(f"{path}: a Dense module with use_residual is not one poolq computes")
    _check_sentence_embedding(path, config)
    return str(module["path"])


def _checked_normalize(model_dir: Path, module: dict) -> bool:
    path = model_dir / module["path"] / "config.json"
    _check_sentence_embedding(path, read_json_object(path, required=False))
    return True


def _check_sentence_embedding(path: Path, config: dict) -> None:
    """Dense and Normalize act on the pooled vector; one acting on token embeddings (multi-vector) is refused."""
    for key in ("module_input_name", "module_output_name"):
        if config.get(key, "sentence_embedding") not in ("sentence_embedding", None):
            raise ModelSpecError(f"{path}: {key}={config[key]!r}; poolq applies this module to the pooled vector only")


def _splade_reduce(model_dir: Path, module: dict) -> str:
    path = model_dir / module["path"] / "config.json"
    config = read_json_object(path, required=False)
    strategy = config.get("pooling_strategy", "max")
    if strategy not in ("max", "sum"):
        raise ModelSpecError(f"{path}: unsupported SPLADE pooling_strategy {strategy!r}")
    if config.get("activation_function", "relu") != "relu":
        raise ModelSpecError(f"{path}: SPLADE activation_function {config['activation_function']!r} is not one poolq "
                             "computes (it computes relu)")
    return strategy


def _transformer_settings(model_dir: Path) -> dict:
    """``sentence_bert_config.json`` (or an older name of it), checked for inputs the engine tokenizes as given."""
    path = next((model_dir / name for name in _TRANSFORMER_CONFIG_FILES if (model_dir / name).exists()),
                model_dir / _TRANSFORMER_CONFIG_FILES[0])
    settings = read_json_object(path, required=False)
    task = settings.get("transformer_task", "feature-extraction")
    if task not in _TRANSFORMER_TASKS:
        raise ModelSpecError(f"{path}: transformer_task {task!r} is not one poolq computes; it computes "
                             f"{', '.join(sorted(_TRANSFORMER_TASKS))}")
    modalities = settings.get("modality_config") or {"text": {}}
    if not isinstance(modalities, dict) or "text" not in modalities or "message" in modalities:
        # with a "message" modality sentence-transformers renders every text through the chat template
        raise ModelSpecError(f"{path}: modality_config {sorted(modalities)} is not plain text; poolq embeds plain text")
    return settings


def _window(model_dir: Path, transformer: dict) -> int | None:
    """sentence_bert_config.json's ``max_seq_length`` (saves before 5.x), else the tokenizer's
    ``model_max_length`` (where sentence-transformers keeps it since)."""
    window = _positive(transformer, "max_seq_length")
    if window is None:
        window = _positive(read_json_object(model_dir / "tokenizer_config.json", required=False), "model_max_length")
    return window


def _prompts(path: Path, model: dict) -> dict[str, str]:
    saved = model.get("prompts") or {}
    if not isinstance(saved, dict):
        raise ModelSpecError(f"{path}: prompts is not an object of prompt names to texts")
    prompts = {} if model.get("model_type") == "CrossEncoder" else dict(DEFAULT_PROMPTS)
    for name, text in saved.items():
        if text is not None and not isinstance(text, str):
            raise ModelSpecError(f"{path}: prompt {name!r} is {text!r}, not a text")
        prompts[str(name)] = text or ""
    return prompts


def _default_prompt_name(path: Path, model: dict, prompts: dict[str, str]) -> str | None:
    name = model.get("default_prompt_name")
    if name is not None and name not in prompts:
        raise ModelSpecError(f"{path}: default_prompt_name {name!r} is not one of its prompts ({', '.join(prompts)})")
    return name


def _truncate_dim(path: Path, model: dict) -> int | None:
    """The size ``encode`` cuts embeddings to by default; anything but a positive whole number is refused,
    as sentence-transformers would cut by it as a slice (``-1`` drops the last dimension, ``0`` all)."""
    truncate_dim = _positive(model, "truncate_dim")
    if truncate_dim is None and model.get("truncate_dim") is not None:
        raise ModelSpecError(f"{path}: truncate_dim is {model['truncate_dim']!r}, not a positive number of dimensions")
    return truncate_dim


def _positive(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def read_json_object(path: Path, *, required: bool) -> dict:
    """A JSON file that must hold an object; a missing optional file reads as ``{}``."""
    data = _read_json(path, required=required)
    if not isinstance(data, dict):
        raise ModelSpecError(f"{path} does not hold a JSON object")
    return data


def read_json_modules(path: Path) -> list[dict]:
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
