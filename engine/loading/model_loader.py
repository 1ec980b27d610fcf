"""Loading a model directory: weights with the right HF head class, tokenizer, runner, poolers."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from poolq.engine.config import EngineConfig
from poolq.engine.device.hardware import resolve_dtype
from poolq.engine.loading.int8_runner import quantize_runner
from poolq.engine.loading.projector import load_projector
from poolq.engine.model_spec import ModelKind, ModelSpec, read_model_spec
from poolq.engine.models.compiled_encoder import CompiledBertEncoder, can_compile
from poolq.engine.models.fused_norm import fuse_norms
from poolq.engine.models.packed_bert import PackedBertEncoder
from poolq.engine.pooling.dispatcher import PoolerDispatcher
from poolq.engine.pooling.factory import build_dispatcher
from poolq.engine.pooling.heads.classifier_heads import Calibration
from poolq.engine.pooling.heads.m3_heads import load_m3_heads
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.runners.runner import ModelRunner, torch_dtype
from poolq.engine.tokenizer import TextTokenizer

# The transformers auto class each kind of model is loaded with.
_AUTO_CLASSES = {
    ModelKind.ENCODER: "AutoModel",
    ModelKind.SEQUENCE_CLASSIFIER: "AutoModelForSequenceClassification",
    ModelKind.TOKEN_CLASSIFIER: "AutoModelForTokenClassification",
    ModelKind.SPARSE_ENCODER: "AutoModelForMaskedLM",
    ModelKind.M3_ENCODER: "AutoModel",
}


Runner = ModelRunner | PackedRunner  # both: forward(BatchMetadata) -> [num_tokens, hidden]


@dataclass
class LoadedModel:
    spec: ModelSpec
    tokenizer: TextTokenizer
    runner: "Runner"
    dispatcher: PoolerDispatcher
    output_dim: int  # of embed outputs (after any projector)
    token_output_dim: int  # of token_embed outputs (BGE-M3: its ColBERT layer's)
    hf_config: object  # the transformers config (FLOP accounting, introspection)
    compute_dtype: str = "float32"  # what it was loaded to compute in (``auto`` resolved)


def load_model(model_dir: Path, config: EngineConfig, calibration: Calibration | None = None) -> LoadedModel:
    """Load everything a PoolingEngine needs from ``model_dir``; never touches the network."""
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight-loading bars would garble CLI output and worker logs
    hf_config = transformers.AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    spec = read_model_spec(model_dir, is_causal=_is_decoder(hf_config.model_type))
    compute_dtype = resolve_dtype(config.dtype, config.device)
    device, dtype = torch.device(config.device), torch_dtype(compute_dtype)
    model = _load_weights(model_dir, spec, hf_config, dtype, packed=config.packed).to(device)
    tokenizer = TextTokenizer(model_dir)
    projector = load_projector(model_dir, spec.dense_dirs)
    if projector is not None:
        projector.to(device=device, dtype=dtype)
    m3 = load_m3_heads(model_dir, tokenizer.unused_token_ids, device, dtype) if spec.kind is ModelKind.M3_ENCODER else None
    dispatcher = build_dispatcher(spec, model, projector, calibration, m3)
    runner = make_runner(getattr(model, "base_model", model), device, tokenizer.pad_token_id, config.packed)
    if compute_dtype == "int8":
        quantize_runner(runner, tokenizer, spec.window_tokens)
    if config.fuse_norms and isinstance(runner, PackedRunner) and isinstance(runner.encoder, PackedBertEncoder):
        fuse_norms(runner.encoder)  # its bias + LayerNorm passes; the other packed families have none to fuse
    if config.compile_encoder and isinstance(runner, PackedRunner) and can_compile(runner.encoder):
        runner.encoder = CompiledBertEncoder(runner.encoder, after_tokens=config.compile_after_tokens)
    output_dim = _last_linear(projector).out_features if projector is not None else spec.hidden_size
    token_output_dim = m3.colbert_linear.out_features if m3 is not None else output_dim
    return LoadedModel(spec, tokenizer, runner, dispatcher, output_dim, token_output_dim, hf_config, compute_dtype)


def make_runner(base_model: torch.nn.Module, device: torch.device, pad_token_id: int, packed: bool) -> Runner:
    """The native packed forward where the architecture has one (``engine/models``' table: the BERT
    family, ModernBERT, Llama, Mistral, Qwen2, Qwen3, Gemma3 text); the generic padded path for the rest."""
    from poolq.engine.models import packed_encoder

    encoder = packed_encoder(base_model) if packed else None
    if encoder is not None:
        return PackedRunner(encoder, device)
    return ModelRunner(base_model, device, pad_token_id)


def _load_weights(model_dir: Path, spec: ModelSpec, hf_config, dtype: torch.dtype, packed: bool) -> torch.nn.Module:
    """The model in eval mode: a BERT-family encoder that will run packed straight from its checkpoint
    (no transformers modeling import, engine/models/bert_checkpoint.py), anything else through the
    transformers class its kind needs. Both give the same parameters."""
    if spec.kind is ModelKind.ENCODER and packed:
        from poolq.engine.models.bert_checkpoint import checkpoint_encoder

        encoder = checkpoint_encoder(model_dir, hf_config, dtype)
        if encoder is not None:
            return encoder
    import transformers

    auto_class = getattr(transformers, _AUTO_CLASSES[spec.kind])
    attention = _attention_implementation(auto_class, hf_config)
    model = auto_class.from_pretrained(str(model_dir), local_files_only=True, dtype=dtype, attn_implementation=attention)
    return model.eval()


def _attention_implementation(auto_class, hf_config) -> str:
    """``sdpa`` where the class the auto class picks implements it, else ``eager``: transformers refuses
    to load a class without sdpa (MPNet) when sdpa is asked for. (The packed runner ignores either.)"""
    from transformers.models.auto.auto_factory import _get_model_class

    model_class = _get_model_class(hf_config, auto_class._model_mapping)
    return "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"


def _is_decoder(model_type: str) -> bool:
    """A model type with a causal-LM class and no masked-LM class is a decoder."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _last_linear(projector: torch.nn.Module) -> torch.nn.Linear:
    return [m for m in projector.modules() if isinstance(m, torch.nn.Linear)][-1]
