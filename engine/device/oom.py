"""What counts as running out of memory in a step, and freeing what can be freed before trying again."""
from __future__ import annotations

import torch

# Allocators that fail with a plain RuntimeError say so in its message: the CPU's (c10's
# "[enforce fail at alloc_cpu.cpp:...] DefaultCPUAllocator: can't allocate memory: ..."), older CUDA
# builds' ("CUDA out of memory"), MPS's ("MPS backend out of memory"). A bare "[enforce fail" is any
# of c10's internal checks, not an allocation, so it is not counted: a smaller batch would not help it.
_OUT_OF_MEMORY_MESSAGES = ("defaultcpuallocator: can't allocate memory", "out of memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """True for an error that a smaller batch may not hit: the device or host ran out of memory."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):  # torch.cuda.OutOfMemoryError is the same class
        return True
    message = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(text in message for text in _OUT_OF_MEMORY_MESSAGES)


def release_cached_memory() -> None:
    """Give the CUDA caching allocator's free blocks back, so the next try (or another process) can
    have them; on a CPU there is no cache to empty. Touches CUDA only where it is in use already."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
