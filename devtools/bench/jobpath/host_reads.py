"""Counting reads of tensor values by the host, by call site: where a GPU would have to wait
(`poolq bench jobpath`'s syncs per step, measured on a CPU).

On a GPU, ``.cpu()``, ``.item()`` and ``.tolist()`` of a device tensor copy it to the host and wait for
the device to get there: a synchronization. On a CPU the same calls cost next to nothing and no tensor
lives on a device, so this counts the calls themselves, in the thread that enters the mode (the
engine's steps run in the caller's thread), each at the line that made it. A read of a floating-point
tensor is counted as a device read: the states, what pooling derives from them and the outputs all
are; the integer tensors read on the host (span bounds, ``cu_seqlens``) are built from the batch's
numpy arrays and never leave the host, and are listed apart. ``.numpy()`` is not counted: it fails on
a device tensor, so code that runs on a GPU calls it on host tensors only (after ``.cpu()``). A GPU
says it exactly: ``torch.cuda.set_sync_debug_mode("warn")`` reports every synchronization.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

import poolq

_ROOT = Path(poolq.__file__).parent  # where poolq's packages are (engine/, jobs/, ...)
_READS = {torch.Tensor.cpu, torch.Tensor.item, torch.Tensor.tolist}


@dataclass(frozen=True)
class ReadSite:
    """One line that read tensor values on the host, and what it read."""

    file: str  # the path inside poolq (engine/pooling/precision.py), or the file's name outside it
    line: int
    call: str  # cpu, item, tolist
    device_read: bool  # a floating-point tensor: on a GPU, a copy to the host and a wait

    def __str__(self) -> str:
        return f"{self.file}:{self.line} .{self.call}()"


class HostReads(TorchFunctionMode):
    """``with HostReads() as reads:`` counts ``reads.sites`` (ReadSite -> calls) in this thread."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: Counter[ReadSite] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _READS and args and isinstance(args[0], torch.Tensor):
            caller = sys._getframe(1)  # the line that called the tensor method (this runs straight from it)
            self.sites[ReadSite(_short(caller.f_code.co_filename), caller.f_lineno, func.__name__,
                                args[0].is_floating_point())] += 1
        return func(*args, **(kwargs or {}))

    def device_reads(self) -> int:
        return sum(count for site, count in self.sites.items() if site.device_read)

    def host_reads(self) -> int:
        return sum(count for site, count in self.sites.items() if not site.device_read)


def _short(path: str) -> str:
    where = Path(path)
    return str(where.relative_to(_ROOT)) if where.is_relative_to(_ROOT) else where.name
