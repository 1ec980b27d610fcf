"""Which GPU each per-GPU worker of ``poolq worker --gpus`` sees: its ``CUDA_VISIBLE_DEVICES``.

An entry is an index (``0``), a GPU UUID (``GPU-8f3a…``, as ``nvidia-smi -L`` prints it, or a
prefix of one) or a MIG id (``MIG-<uuid>``, or the older ``MIG-GPU-<uuid>/<gi>/<ci>``). An index
counts within the GPUs this process may use: with ``CUDA_VISIBLE_DEVICES=2,3`` inherited (a
scheduler's or a container's allotment), ``--gpus 1`` is GPU 3, as CUDA itself would number them;
a UUID or a MIG id names one device wherever it is and is passed on as given.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_INDEX = re.compile(r"\d+")
_UUID = r"[0-9a-fA-F]+(?:-[0-9a-fA-F]+)*"
_DEVICE_ID = re.compile(rf"GPU-{_UUID}|MIG-{_UUID}|MIG-GPU-{_UUID}/\d+/\d+")
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9-]")  # a Celery node name's own separators (@, /) among them


class GpuSelectionError(ValueError):
    """``--gpus`` names something that is no GPU this process may use."""


@dataclass(frozen=True)
class GpuSlot:
    """One per-GPU worker: its name (in its Celery node name) and the device CUDA shows it."""

    name: str
    visible_devices: str


def split_gpus(text: str) -> list[str]:
    """The entries of a comma-separated ``--gpus`` value, blanks dropped."""
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def gpu_slots(gpus: Sequence[str], inherited: str | None) -> list[GpuSlot]:
    """One slot per entry of ``gpus``; ``inherited`` is this process's ``CUDA_VISIBLE_DEVICES``
    (None: unset, every GPU visible, an index is the device's own). Refuses an entry that is no
    index, UUID or MIG id, an index past the inherited list, and two entries for one device."""
    if not gpus:
        raise GpuSelectionError("--gpus names no GPU: expected indices (0,1), GPU UUIDs (GPU-…) or MIG ids (MIG-…)")
    allotted = None if inherited is None else split_gpus(inherited)
    slots = [_slot(entry, allotted, inherited) for entry in gpus]
    seen: dict[str, str] = {}
    for entry, slot in zip(gpus, slots):
        if slot.visible_devices in seen:
            raise GpuSelectionError(f"--gpus entries {seen[slot.visible_devices]!r} and {entry!r} both select GPU "
                                    f"{slot.visible_devices!r}: one worker per GPU")
        seen[slot.visible_devices] = entry
    return slots


def _slot(entry: str, allotted: list[str] | None, inherited: str | None) -> GpuSlot:
    if _DEVICE_ID.fullmatch(entry):
        return GpuSlot(_NOT_IN_A_NAME.sub("-", entry), entry)
    if not _INDEX.fullmatch(entry):
        raise GpuSelectionError(f"--gpus entry {entry!r} is not a GPU index (0), a GPU UUID (GPU-8f3a…) or a MIG id "
                                "(MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>)")
    index = int(entry)
    if allotted is None:
        return GpuSlot(f"gpu{index}", str(index))
    if index >= len(allotted):
        indices = f"0 to {len(allotted) - 1}" if allotted else "none"
        raise GpuSelectionError(f"--gpus entry {entry}: the inherited CUDA_VISIBLE_DEVICES={inherited!r} lists "
                                f"{len(allotted)} GPU(s), and an index counts within it (indices: {indices})")
    return GpuSlot(f"gpu{index}", allotted[index])
