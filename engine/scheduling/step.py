"""What one step of the engine reports: the contract between the engine's loop and its callers
(a job's shard, the interactive lane). Plain Python: no torch here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from poolq.engine.request import EngineResult


@dataclass(frozen=True)
class RequestProgress:
    """How far one unfinished request is: tokens of its windows run so far, of all it has."""

    key: Hashable
    tokens_done: int
    tokens_total: int


@dataclass(frozen=True)
class StepOutput:
    """One step: a batch through the model (``tokens`` > 0), or a wait on tokenization (0).

    ``finished``: the requests this step completed, in any order (planning failures finish in the
    step that planned them). ``in_progress``: the requests the step ran windows of without
    finishing them (a long document's partial progress). ``planned_tokens`` and ``planned_chars``:
    what the requests planned since the previous step will cost (tokens through the model) and
    how long their texts are, so a caller can tell its characters per token.
    """

    tokens: int
    finished: tuple[EngineResult, ...] = ()
    in_progress: tuple[RequestProgress, ...] = ()
    planned_tokens: int = 0
    planned_chars: int = 0
