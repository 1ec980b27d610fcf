"""Reading an API answer as the JSON dict it used to be, for one release: ``job["usage"]["tokens"]``.

The Python client returned plain dicts until it returned the response models themselves
(``JobStatus``, ``JobResults``, ...). Code written against the dicts keeps working: subscripting a
model, ``.get`` and ``in`` answer with what the JSON dict held (nested models as dicts, times as ISO
strings, states as their strings), and warn (DeprecationWarning) naming the attribute to read
instead. Only these three: ``keys``/``items``/``__iter__`` would change what ``dict(model)`` and
``**model`` do, which the server's own code relies on.
"""
from __future__ import annotations

import warnings
from typing import Any

from pydantic import BaseModel

_MISSING = object()


class DictAccessDeprecated:
    """Mix into a response model (before ``BaseModel``): ``model["field"]``, ``model.get("field")``
    and ``"field" in model`` as on its JSON dict, each with a DeprecationWarning."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        value = _json_field(self, key, stacklevel=3)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = _json_field(self, key, stacklevel=3)
        return default if value is _MISSING else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _json_field(self, key, stacklevel=3) is not _MISSING


def _json_field(model: object, key: str, *, stacklevel: int) -> Any:
    """``key``'s value as the answer's JSON has it (``model_dump(mode="json", by_alias=True)``;
    ``_MISSING`` if it has no such key), after warning the caller (``stacklevel``: the frame that
    subscripted the model)."""
    if not isinstance(model, BaseModel):  # the mixin is for response models only
        raise TypeError(f"{type(model).__name__} mixes in DictAccessDeprecated but is not a pydantic model")
    name = type(model).__name__
    value = model.model_dump(mode="json", by_alias=True, include={key}).get(key, _MISSING)
    instead = f"read {name}.{key}" if value is not _MISSING else f"{name} has no field {key!r}"
    warnings.warn(f"{name}[{key!r}] (dict access) is deprecated and goes in the next release: {instead} "
                  "(the client returns typed models)", DeprecationWarning, stacklevel=stacklevel)
    return value
