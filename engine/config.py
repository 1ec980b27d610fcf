"""Engine configuration: frozen values passed in by the caller, never read from the environment."""
from __future__ import annotations

from dataclasses import dataclass

# What the engine computes in. int8 weights are loaded as float32, then quantized and measured.
COMPUTE_DTYPES = ("float32", "float16", "bfloat16", "int8")
# What a caller may ask for: a compute dtype, or ``auto`` (engine/device/hardware.py's resolve_dtype picks it
# for the device when the model loads: bf16 where the hardware runs it natively, else fp16/fp32).
REQUESTED_DTYPES = (*COMPUTE_DTYPES, "auto")


class EngineConfigError(ValueError):
    """A configuration value the engine cannot work with."""


@dataclass(frozen=True)
class EngineConfig:
    """How the engine batches and where it runs.

    ``max_num_batched_tokens`` bounds the tokens of one forward pass (the flat layout's
    length); ``max_num_seqs`` bounds the sequences in it. ``lookahead_tokens`` is how many
    tokens of upcoming requests the streaming loop tokenizes ahead, so it can sort them by
    length before packing; memory stays flat in corpus size because it is bounded.
    """

    device: str = "cpu"
    # auto: resolved when the model loads (PoolingEngine.from_pretrained, load_model);
    # int8: the packed encoder's GEMMs in int8, quality-gated (engine/models/int8_encoder.py)
    dtype: str = "auto"
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 128
    lookahead_tokens: int = 65536
    num_threads: int | None = None
    packed: bool = True  # the native packed forward where the architecture has one
    max_chunks_per_document: int | None = None  # chunk modes: more chunk rows are a per-record error
    # Experimental: bias + LayerNorm after the dense GEMMs as one inductor-compiled pass (packed
    # encoders; engine/models/fused_norm.py). Off by default: not yet measured on a quiet machine.
    fuse_norms: bool = False
    # The packed BERT-family layer stack as one inductor graph (engine/models/compiled_encoder.py), on the CPU.
    # Off by default: on a Xeon with AMX it measured 1.02-1.04x the eager bf16 forward (docs/benchmarks.md,
    # 2026-12-05), too little to pay a 10-40 s compile in a running worker.
    compile_encoder: bool = False
    compile_after_tokens: int = 500_000

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens < 1:
            raise EngineConfigError(f"max_num_batched_tokens must be >= 1, got {self.max_num_batched_tokens}")
        if self.max_num_seqs < 1:
            raise EngineConfigError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.lookahead_tokens < self.max_num_batched_tokens:
            raise EngineConfigError(
                f"lookahead_tokens ({self.lookahead_tokens}) must be >= max_num_batched_tokens "
                f"({self.max_num_batched_tokens})"
            )
        if self.max_chunks_per_document is not None and self.max_chunks_per_document < 1:
            raise EngineConfigError(f"max_chunks_per_document must be >= 1, got {self.max_chunks_per_document}")
        if self.dtype not in REQUESTED_DTYPES:
            raise EngineConfigError(f"dtype must be one of {', '.join(REQUESTED_DTYPES)}, got {self.dtype!r}")
        if self.compile_after_tokens < 0:
            raise EngineConfigError(f"compile_after_tokens must be >= 0, got {self.compile_after_tokens}")
        if self.compile_encoder and not self.device.startswith("cpu"):
            raise EngineConfigError(f"compile_encoder compiles for the CPU; on {self.device} leave it False")
        if self.dtype == "int8" and not self.device.startswith("cpu"):
            raise EngineConfigError(f"dtype int8 runs on the CPU (fbgemm); on {self.device} use bfloat16 or float16")
