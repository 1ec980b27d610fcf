"""Models named by a Hugging Face Hub id, ``org/name`` or ``org/name@revision``.

Files come through ``huggingface_hub`` into the Hub cache that every process on the host shares
(``HF_HOME``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``, ``HF_TOKEN``, ``HF_ENDPOINT`` as users set them;
its file locks make concurrent downloads safe). Two views of one snapshot:

* what describes the model (``config.json``, the sentence-transformers files, the tokenizer): all the
  API ever fetches, to validate a job, estimate it and list the model;
* the weights, safetensors only, fetched by a worker that computes with the model.

Beside the description, its card (``README.md``) is fetched once, best effort (``hub_card.py``): the
Matryoshka sizes ``GET /v1/models`` lists.

A revision is pinned to its commit when a job is accepted (``pin``), so every shard, and a later
reindex that compares engine identities, computes with the same files. The operator decides what may
be downloaded (``HubAccess.allow``: glob patterns of ids); an id outside them is refused before
anything is fetched.
"""
from __future__ import annotations

import fnmatch
import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from poolq.engine.loading.hub_card import fetch_card
from poolq.engine.model_spec import ModelSpecError

# A commit hash: what a pinned revision is, and the name of the snapshot folder it lives in.
COMMIT = re.compile(r"[0-9a-f]{40}")
# Git ref names as the Hub accepts them for revisions (branches, tags, commits); no path tricks.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
# What describes a model: read to validate a job, never the weights.
DESCRIPTION_FILES = (
    "config.json", "modules.json", "sentence_*_config.json", "config_sentence_transformers.json",
    "*/config.json", "*/sentence_*_config.json",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.txt", "vocab.json", "merges.txt", "*.model",
)
# The weights: safetensors (sharded or not, the model's and its modules'), and BGE-M3's two small
# head files, which the engine reads with ``torch.load(weights_only=True)`` (tensors only, no code).
WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "*/*.safetensors", "sparse_linear.pt", "colbert_linear.pt")


class ModelNameError(ValueError):
    """A model name that is not a name: too long, or characters no model name has."""


class HubModelRefused(ModelSpecError):
    """A Hub model poolq will not load (pickled weights only, custom code), or one not allowed here."""


class HubUnavailable(RuntimeError):
    """The Hub (or the mirror) did not answer, and the files are not in this host's cache."""


@dataclass(frozen=True)
class HubModelName:
    repo_id: str
    revision: str | None = None  # None: the default branch

    @property
    def pinned(self) -> bool:
        return self.revision is not None and COMMIT.fullmatch(self.revision) is not None

    def __str__(self) -> str:
        return self.repo_id if self.revision is None else f"{self.repo_id}@{self.revision}"


def parse_hub_name(name: str) -> HubModelName | None:
    """``org/name[@revision]`` as a Hub id, or None where ``name`` does not have that shape."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    repo_id, _, revision = name.partition("@")
    if repo_id.count("/") != 1:
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return None
    if revision and not _REVISION.fullmatch(revision) or ".." in revision:
        return None
    return HubModelName(repo_id, revision or None)


@dataclass(frozen=True)
class HubAccess:
    """Which Hub ids this deployment may download: glob patterns of ids (``BAAI/*,intfloat/e5-*``).
    None allowed by default: only packaged and configured models are served."""

    allow: tuple[str, ...] = ()

    @classmethod
    def parse(cls, patterns: str) -> "HubAccess":
        return cls(tuple(pattern.strip() for pattern in patterns.split(",") if pattern.strip()))

    def allows(self, repo_id: str) -> bool:
        return any(fnmatch.fnmatchcase(repo_id, pattern) for pattern in self.allow)

    def check(self, name: HubModelName) -> None:
        if not self.allows(name.repo_id):
            allowed = ", ".join(self.allow) or "none (POOLQ_MODELS_ALLOW is empty)"
            raise HubModelRefused(f"model {name.repo_id!r} is not allowed on this server; Hub ids allowed: {allowed}")


def pin(name: HubModelName) -> str:
    """The commit ``name``'s revision points at now (fetching the description files on the way)."""
    return Path(_snapshot(name.repo_id, name.revision, DESCRIPTION_FILES)).name


def description_dir(repo_id: str, commit: str) -> Path:
    """The snapshot folder of ``commit`` holding the description files (never the weights), each
    checked loadable: the weights poolq loads exist, no custom code is needed."""
    return _checked_description(repo_id, commit, hub_cache_dir())


@functools.lru_cache(maxsize=256)
def _checked_description(repo_id: str, commit: str, cache_dir: Path) -> Path:
    """Once per process and commit (a commit's files never change): a validation, an estimate and a
    shard's identity ask again and again, and online each ask would be a Hub round trip."""
    snapshot = Path(_snapshot(repo_id, commit, DESCRIPTION_FILES))
    check_loadable(f"{repo_id}@{commit}", snapshot, _repo_files(repo_id, commit, snapshot))
    if not offline():  # offline, a card the cache holds already sits in the snapshot
        fetch_card(repo_id, commit, snapshot, cache_dir)
    return snapshot


def weights_dir(repo_id: str, commit: str) -> Path:
    """The snapshot folder of ``commit`` with the weights too (a worker about to load it)."""
    description_dir(repo_id, commit)
    return Path(_snapshot(repo_id, commit, (*DESCRIPTION_FILES, *WEIGHT_FILES)))


def check_loadable(name: str, snapshot: Path, files: list[str]) -> None:
    """Refuse, naming the model and why, what poolq will not load."""
    config = _json(snapshot / "config.json")
    if isinstance(config, dict) and config.get("auto_map"):
        raise HubModelRefused(f"model {name!r} needs its own code (config.json auto_map, trust_remote_code): "
                              "poolq runs no code from a model repository")
    modules = _json(snapshot / "modules.json") if (snapshot / "modules.json").exists() else []
    types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)] if isinstance(modules, list) else []
    custom = [kind for kind in types if not kind.startswith("sentence_transformers.")]
    if custom:
        raise HubModelRefused(f"model {name!r} needs its own code (modules.json types {custom}): poolq runs no code "
                              "from a model repository")
    if not any(file.endswith(".safetensors") and "/" not in file for file in files):
        pickled = [file for file in files if file.endswith((".bin", ".pt", ".pth", ".ckpt"))]
        why = f"only pickled weights ({', '.join(pickled[:3])})" if pickled else "no weights"
        raise HubModelRefused(f"model {name!r} has {why}; poolq loads safetensors weights only (unpickling a file "
                              "can run code)")


def hub_cache_dir() -> Path:
    """The Hub cache as ``huggingface_hub`` places it, read now (tests and operators set it late)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _snapshot(repo_id: str, revision: str | None, patterns: tuple[str, ...]) -> str:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}@{revision}" if revision else repo_id
    try:
        return snapshot_download(repo_id, revision=revision, cache_dir=hub_cache_dir(), allow_patterns=list(patterns),
                                 local_files_only=offline())
    except GatedRepoError as exc:
        raise HubModelRefused(f"model {where!r} is gated: its terms must be accepted on the Hub and HF_TOKEN set "
                              f"({exc.__class__.__name__})") from None
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise HubModelRefused(f"model {where!r} was not found on the Hub (a private one needs HF_TOKEN)") from None
    except LocalEntryNotFoundError:
        if offline():
            raise HubModelRefused(f"model {where!r} is not in this host's Hub cache and HF_HUB_OFFLINE is set "
                                  "(`poolq models pull` fills the cache)") from None
        raise HubUnavailable(f"the Hub did not answer for {where!r} and its files are not cached here") from None


def _repo_files(repo_id: str, commit: str, snapshot: Path) -> list[str]:
    """The files of the repository at ``commit``: asked of the Hub, else (offline) the cached snapshot's."""
    if not offline():
        from huggingface_hub import HfApi

        try:
            return list(HfApi().list_repo_files(repo_id, revision=commit))
        except OSError as exc:
            raise HubUnavailable(f"the Hub did not list the files of {repo_id}@{commit}: {exc}") from None
    return [path.relative_to(snapshot).as_posix() for path in snapshot.rglob("*") if path.is_file() or path.is_symlink()]


def _json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelSpecError(f"{path.name} is missing from the model's files") from None
    except json.JSONDecodeError as exc:
        raise ModelSpecError(f"{path.name} is not valid JSON: {exc}") from None
