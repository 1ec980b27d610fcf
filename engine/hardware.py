"""What the machine computes fast, read from ``/proc/cpuinfo``: the compute dtype ``auto`` picks.

No torch here: the flags are the kernel's own report of the CPU's instruction sets.
"""
from __future__ import annotations

from pathlib import Path

# Instruction sets that make bf16 matmuls faster than fp32 (AMX tiles, AVX-512 BF16 dot products).
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
DTYPES = ("float32", "float16", "bfloat16")
# The flags logs and benchmarks name: what decides the compute dtype and the kernels' speed.
NOTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The first CPU's flags (``/proc/cpuinfo``, or the text given); empty where unreadable."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def noted_flags(flags: frozenset[str] | None = None) -> list[str]:
    """Which of ``NOTED_FLAGS`` this CPU (or ``flags``) has, in that order."""
    present = cpu_flags() if flags is None else flags
    return [flag for flag in NOTED_FLAGS if flag in present]


def resolve_dtype(requested: str, device: str, flags: frozenset[str] | None = None) -> str:
    """``requested``, or for ``auto``: bfloat16 on CUDA and on CPUs with AMX or AVX-512-BF16
    (detected, never guessed from a model or CPU name), float32 elsewhere."""
    if requested != "auto":
        return requested
    if device.startswith("cuda"):
        return "bfloat16"
    return "bfloat16" if (cpu_flags() if flags is None else flags) & BF16_FLAGS else "float32"
