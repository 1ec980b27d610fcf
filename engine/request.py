"""Request and result types of the engine's public API. Plain Python and numpy: no torch."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Hashable

import numpy as np


class LongDocumentMode(str, Enum):
    """What to do with a document longer than the model's window."""

    ERROR = "error"  # a per-record error naming the token count and the limit
    TRUNCATE = "truncate"  # keep one window; the output says truncated=True


class TruncationSide(str, Enum):
    """Which side of a long document truncation cuts off."""

    END = "end"  # keep the first window
    START = "start"  # keep the last window


@dataclass(frozen=True)
class LongDocumentPolicy:
    """How the engine treats documents longer than the window (``window_tokens`` or the model's)."""

    mode: LongDocumentMode = LongDocumentMode.ERROR
    side: TruncationSide = TruncationSide.END
    window_tokens: int | None = None


@dataclass(frozen=True)
class EmbedRequest:
    """One text to embed; ``key`` is the caller's handle, returned with the result."""

    key: Hashable
    text: str


@dataclass(frozen=True)
class EmbedOutput:
    """The embedding of one request.

    ``num_tokens`` counts the whole input before truncation; ``processed_tokens`` counts what
    the model actually ran (the usage a job reports).
    """

    key: Hashable
    embedding: np.ndarray = field(repr=False)  # [dim] float32
    num_tokens: int
    truncated: bool
    processed_tokens: int


@dataclass(frozen=True)
class RequestError:
    """A request the engine could not embed; the others are unaffected."""

    key: Hashable
    code: str
    message: str


EngineResult = EmbedOutput | RequestError
