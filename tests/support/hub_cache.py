"""A Hugging Face Hub cache laid out as ``huggingface_hub`` writes it, filled from local folders: tests
name models by Hub id exactly as users do, offline (``HF_HOME`` a temporary folder, ``HF_HUB_OFFLINE=1``)."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def publish(hf_home: Path, repo_id: str, model_dir: Path, *, seed: str = "", tags: tuple[str, ...] = (),
            branch: str | None = "main") -> str:
    """Copy ``model_dir`` into the cache as a new commit of ``repo_id``; ``branch`` (and ``tags``) point at
    it. Returns the commit hash (derived from the files and ``seed``, so two publishes differ)."""
    digest = hashlib.sha1(f"{repo_id}\0{seed}".encode())
    for path in sorted(model_dir.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(model_dir).as_posix().encode() + path.read_bytes())
    commit = digest.hexdigest()
    repo = hf_hub_repo(hf_home, repo_id)
    shutil.copytree(model_dir, repo / "snapshots" / commit, dirs_exist_ok=True)
    for ref in ([branch] if branch else []) + list(tags):
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return commit


def hf_hub_repo(hf_home: Path, repo_id: str) -> Path:
    return hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))


def tiny_st_bert(path: Path, seed: int) -> Path:
    """A seeded random BERT (hidden 32) with sentence-transformers' mean pooling + Normalize files."""
    from transformers import BertModel

    from support.random_models import save_random_model, tiny_bert_config, write_st_modules

    path.mkdir(parents=True, exist_ok=True)
    save_random_model(path, BertModel, tiny_bert_config(), seed=seed)
    write_st_modules(path, 32, pooling="mean", normalize=True)
    return path


def offline_hub(monkeypatch, hf_home: Path) -> Path:
    """Point huggingface_hub (as poolq reads it, at each call) at ``hf_home``, offline."""
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hf_home
