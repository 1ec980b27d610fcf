"""What models this deployment serves, and the engine that runs them: device, dtype, step size."""
from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from poolq.engine import DEFAULT_MODEL, EngineConfig
from poolq.engine.device.hardware import resolve_dtype_before_fork
from poolq.jobs.settings.group import SettingsGroup


class ServingSettings(SettingsGroup):
    """The models (packaged, local, allowed from the Hub), their warm-up and memory, and the engine's knobs."""

    default_model: str = DEFAULT_MODEL
    models: dict[str, str] = Field(default_factory=dict, description="extra model name -> local directory")
    models_allow: str = Field("", description="POOLQ_MODELS_ALLOW: comma-separated glob patterns of Hugging Face Hub "
                              "ids this server may download and serve (BAAI/*,intfloat/e5-*); empty: none, only the "
                              "packaged models and POOLQ_MODELS entries (docs/models.md)")
    warm_default_model: bool = Field(True, description="compute workers load default_model as they start, not in "
                                     "their first shard or interactive request")
    warm_models: str = Field("", description="POOLQ_WARM_MODELS: comma-separated models each compute worker loads "
                             "and runs once as it starts (empty: default_model); warm_default_model=false: none")
    worker_model_memory: int | None = Field(None, ge=1, description="POOLQ_WORKER_MODEL_MEMORY: bytes of model weights "
                                            "a worker process keeps loaded; a load past it first unloads the least "
                                            "recently used idle models (unset: no bound)")
    device: str = "cpu"
    # auto: bfloat16 on Ampere+ GPUs and on CPUs with AMX or AVX-512-BF16, float16 on older GPUs, float32 on
    # other CPUs (engine/device/hardware.py);
    # int8 (CPU): the encoder's GEMMs in int8 where that keeps cosine >= 0.99 to float32, else refused
    # POOLQ_COMPUTE_DTYPE (POOLQ_DTYPE, its first name, still works)
    dtype: Literal["float32", "float16", "bfloat16", "int8", "auto"] = Field(
        "auto", validation_alias=AliasChoices("POOLQ_COMPUTE_DTYPE", "POOLQ_DTYPE", "dtype"))
    # The engine's step: progress, cancel and the interactive lane's turn come between two steps, so
    # a step stays about a second of work. On a 2-core CPU, MiniLM does ~2,000 tokens/s, and a
    # smaller batch costs it no throughput (its GEMMs are long enough either way).
    max_num_batched_tokens: int | None = Field(None, ge=64, description="tokens per engine step; unset: 8192 on a "
                                               "GPU, 2048 on a CPU")
    max_num_seqs: int = Field(128, ge=1)
    max_chunks_per_document: int = Field(10_000, ge=1, description="chunk modes: a document making more chunk rows "
                                         "is a per-record error (too_many_chunks)")

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def step_tokens(self) -> int:
        """Tokens per engine step: ``max_num_batched_tokens``, else the default for ``device``."""
        return self.max_num_batched_tokens or (8192 if self.on_gpu else 2048)

    @property
    def compute_dtype(self) -> str:
        """The dtype the engine computes in here: ``dtype``, with ``auto`` resolved for this machine's
        CPU; on a CUDA device ``auto`` stays, resolved where the engine loads (CUDA is not touched here)."""
        return resolve_dtype_before_fork(self.dtype, self.device)

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            device=self.device,
            dtype=self.compute_dtype,
            max_num_batched_tokens=self.step_tokens,
            max_num_seqs=self.max_num_seqs,
            max_chunks_per_document=self.max_chunks_per_document,
            lookahead_tokens=max(65536, self.step_tokens),
        )
