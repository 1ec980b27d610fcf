"""The machine the benchmark ran on: CPU, cores, memory, CPU flags and GPUs, and the header line that describes it."""
from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

from poolq.engine.device.hardware import NOTED_FLAGS, cpu_model, noted_flags


def has_nvidia_device() -> bool:
    """An NVIDIA device node exists (only then is torch worth importing to ask about CUDA)."""
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0"))


def _memory_gb() -> float | None:
    memory_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return memory_gb


def _gpus() -> list[str]:
    if not has_nvidia_device():
        return []
    try:
        import torch

        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no usable CUDA: report none
        return []


def machine_facts() -> dict:
    memory_gb = _memory_gb()
    return {"cpu": cpu_model() or platform.processor() or "unknown", "logical_cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0)),
            "memory_gb": round(memory_gb, 1) if memory_gb else None, "flags": noted_flags(),
            "python": platform.python_version(), "kernel": platform.release(), "gpus": _gpus()}


def format_machine(facts: dict, args: argparse.Namespace) -> str:
    from poolq.jobs import Settings

    settings = Settings(**{k: v for k, v in args.settings.items()})
    flags = ", ".join(facts["flags"]) or f"none of {', '.join(NOTED_FLAGS)}"
    return "\n".join([
        f"machine: {facts['cpu']}; {facts['logical_cores']} logical cores ({facts['usable_cores']} usable), "
        f"{facts['memory_gb']} GiB RAM; kernel {facts['kernel']}, Python {facts['python']}",
        f"cpu flags: {flags}" + (f"; GPUs: {', '.join(facts['gpus'])}" if facts.get("gpus") else ""),
        f"model {args.model} on {settings.serving.device}, output {args.output_dtype}; {args.workers} worker(s) x concurrency 1, "
        f"{args.threads_per_worker} torch thread(s) each; shards <= {settings.sharding.shard_max_documents} documents and "
        f"<= {settings.shard_token_budget} estimated tokens; dispatch window {settings.sharding.dispatch_window}"
        + (f"; settings {args.settings}" if args.settings else ""),
    ])
