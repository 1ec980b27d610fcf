"""What the machine computes fast, read from ``/proc/cpuinfo``: the compute dtype ``auto`` picks.

No torch at import: the flags are the kernel's own report of the CPU's instruction sets; a CUDA
device's compute capability is asked of torch only where the engine loads (a worker's pool child):
asking initialises CUDA, and a process that did can no longer fork children that use it.
"""
from __future__ import annotations

import os
from functools import cache
from pathlib import Path

# Instruction sets that make bf16 matmuls faster than fp32 (AMX tiles, AVX-512 BF16 dot products).
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
# AMX tiles: torch's CPU flash-attention kernel runs its bf16 blocks on them (cpublas brgemm).
AMX_BF16_FLAG = "amx_bf16"
DTYPES = ("float32", "float16", "bfloat16")
# The flags logs and benchmarks name: what decides the compute dtype and the kernels' speed.
NOTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")


def _cpuinfo_field(name: str, cpuinfo: str | None) -> str | None:
    """The first CPU's ``name`` line of ``/proc/cpuinfo`` (or of the text given); None where absent."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The first CPU's flags (``/proc/cpuinfo``, or the text given); empty where unreadable."""
    return frozenset((_cpuinfo_field("flags", cpuinfo) or "").split())


def cpu_model(cpuinfo: str | None = None) -> str | None:
    """The first CPU's model name (``AMD EPYC 7B13``); None where the kernel does not say."""
    return _cpuinfo_field("model name", cpuinfo)


def noted_flags(flags: frozenset[str] | None = None) -> list[str]:
    """Which of ``NOTED_FLAGS`` this CPU (or ``flags``) has, in that order."""
    present = cpu_flags() if flags is None else flags
    return [flag for flag in NOTED_FLAGS if flag in present]


@cache
def native_bf16_cpu() -> bool:
    """Whether this CPU has bf16 instructions (AVX-512-BF16, AMX); read once per process. Without
    them oneDNN emulates bf16 GEMMs, 5x (AVX-512) to 20x (AVX2) slower than native."""
    return has_native_bf16(cpu_flags())


def has_native_bf16(flags: frozenset[str]) -> bool:
    """The one bf16 rule: ``flags`` name AMX-BF16 or AVX-512-BF16."""
    return bool(flags & BF16_FLAGS)


@cache
def explicit_bf16_attention_cpu() -> bool:
    """Whether bf16 attention on this CPU takes two GEMMs and a softmax (engine/attention.py); read once."""
    return explicit_bf16_attention(cpu_flags())


def explicit_bf16_attention(flags: frozenset[str]) -> bool:
    """bf16 attention as two oneDNN GEMMs and a softmax where ``flags`` name AVX-512-BF16 without AMX;
    SDPA's flash kernel elsewhere. With AMX the flash kernel wins: 1.3x MiniLM end to end on a
    Xeon with AMX (docs/benchmarks.md, 2026-12-05); without bf16 instructions the GEMMs are emulated."""
    return has_native_bf16(flags) and AMX_BF16_FLAG not in flags


def resolve_dtype(requested: str, device: str, flags: frozenset[str] | None = None,
                  cuda_capability: tuple[int, int] | None = None) -> str:
    """``requested``, or for ``auto``: bfloat16 on CPUs with AMX or AVX-512-BF16 (detected, never
    guessed from a model or CPU name), float32 on other CPUs; on CUDA bfloat16 from Ampere (compute
    capability 8.0) on, float16 before it (T4, V100: fp16 tensor cores, bf16 only emulated)."""
    if requested != "auto":
        return requested
    if device.startswith("cuda"):
        major, _ = cuda_device_capability(device) if cuda_capability is None else cuda_capability
        return "bfloat16" if major >= 8 else "float16"
    return "bfloat16" if has_native_bf16(cpu_flags() if flags is None else flags) else "float32"


def resolve_dtype_before_fork(requested: str, device: str) -> str:
    """``requested``, with ``auto`` resolved only where that needs no device: a CPU's flags. On a
    CUDA device ``auto`` is kept for the process that loads the engine to resolve (a Celery
    worker's parent must not initialise CUDA: its forked pool children could not use it then)."""
    return requested if requested == "auto" and device.startswith("cuda") else resolve_dtype(requested, device)


class CudaDeviceError(RuntimeError):
    """torch cannot read a CUDA device's compute capability: no CUDA in this torch build, no such
    device, or CUDA already initialised in the process this one was forked from."""


def cuda_device_capability(device: str) -> tuple[int, int]:
    """The CUDA device's compute capability; a ``CudaDeviceError`` naming the device and torch's
    reason where torch cannot tell (never a guess: a wrong guess only moves the failure to the load)."""
    import torch  # only where a CUDA engine loads: the API, the CPU paths and a worker's parent never get here

    try:
        major, minor = torch.cuda.get_device_capability(device)
    except (AssertionError, RuntimeError, ValueError) as exc:  # "not compiled with CUDA", no device, a bad fork
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        seen = "" if visible is None else f" (CUDA_VISIBLE_DEVICES={visible!r})"
        raise CudaDeviceError(f"CUDA device {device!r}{seen}: torch cannot read its compute capability, which compute "
                              f"dtype auto needs: {exc}") from exc
    return (int(major), int(minor))
