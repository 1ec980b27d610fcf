"""A fake ``torch.cuda`` for processes a test starts, installed by a ``sitecustomize`` (``install``):
every call is noted with the calling process into ``FAKE_CUDA_LOG`` (JSON lines), and it keeps
torch's fork rule: a process forked from one that initialised CUDA cannot initialise it again
(torch's ``_is_in_bad_fork``: "Cannot re-initialize CUDA in forked subprocess").

Each process that runs Python from the start (not a fork) notes ``start``, and ``torch`` once it
imported torch with the fake in place, so a test can tell exec'd processes (a supervisor, a Celery
worker's parent) from forks (its pool children). The capability it reports is
``FAKE_CUDA_CAPABILITY`` ("8,0" by default). No real device is touched: moving a tensor to
``cuda`` still fails with torch's own error.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

FORK_ERROR = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
              "'spawn' start method")


class _State:
    initialized = False  # this process initialised CUDA
    bad_fork = False  # forked from a process that had


def note(event: str, **fields: Any) -> None:
    """One line for ``event`` in this process (O_APPEND: lines of concurrent processes do not mix)."""
    line = json.dumps({"event": event, "pid": os.getpid(), "ppid": os.getppid(), **fields}) + "\n"
    fd = os.open(os.environ["FAKE_CUDA_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _after_fork_in_child() -> None:
    if _State.initialized:  # as torch's own fork handler: the child may not use the parent's CUDA
        _State.initialized, _State.bad_fork = False, True


def _lazy_init() -> None:
    if _State.initialized:
        return
    if _State.bad_fork:
        note("fork-error")
        raise RuntimeError(FORK_ERROR)
    note("init")
    _State.initialized = True


def _capability() -> tuple[int, int]:
    major, minor = os.environ.get("FAKE_CUDA_CAPABILITY", "8,0").split(",")
    return int(major), int(minor)


def _noted(name: str, initializes: bool, result: Any = None) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        note(name, args=[str(arg) for arg in args])
        if initializes:
            _lazy_init()
        return result() if callable(result) else result

    return call


def _patch(cuda: ModuleType) -> None:
    major, minor = _capability()
    fakes = {
        "_lazy_init": _lazy_init,
        "init": _lazy_init,
        "is_initialized": lambda: _State.initialized,
        "_is_in_bad_fork": lambda: _State.bad_fork,
        "is_available": _noted("is_available", False, True),
        "device_count": _noted("device_count", False, 1),
        "get_device_capability": _noted("get_device_capability", True, _capability),
        "get_device_properties": _noted("get_device_properties", True, lambda: SimpleNamespace(
            name="Fake GPU", major=major, minor=minor, total_memory=80 << 30, multi_processor_count=132)),
        "get_device_name": _noted("get_device_name", True, "Fake GPU"),
        "current_device": _noted("current_device", True, 0),
        "set_device": _noted("set_device", True),
        "synchronize": _noted("synchronize", True),
    }
    for name, fake in fakes.items():
        setattr(cuda, name, fake)


class _PatchTorchOnImport(importlib.abc.MetaPathFinder):
    """Patches ``torch.cuda`` as soon as torch is imported: a process that never imports torch pays nothing."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            raise ImportError("fake_torch_cuda: no torch to patch")
        real_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            _patch(module.cuda)
            note("torch")

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Called by a ``sitecustomize`` at interpreter start."""
    note("start")
    os.register_at_fork(after_in_child=_after_fork_in_child)
    sys.meta_path.insert(0, _PatchTorchOnImport())
