"""Plans of the token tasks (token_embed, token_classify): one output row per token, with each
token's id and character offsets, so a reader can drop special or punctuation tokens.

A document within the window is one sequence. Beyond it (``chunked``), macro windows step by
``window - overlap`` and every window after the first keeps only its states after the overlap
(the stitching of long late chunking): every token gets exactly one state, and the token head
runs once over the stitched states. The states stay in the model's dtype on its device until the head
(engine/pooling/precision.py): a float32 host copy would meet a bf16 head.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Hashable

import numpy as np
import torch

from poolq.engine.long_documents.window_plans import DocumentPlan, SinglePlan
from poolq.engine.request import PoolingOutput, PoolingParams

if TYPE_CHECKING:
    from poolq.engine.pooling.pooler import Head


@dataclass
class TokenPlan(SinglePlan):
    """One window: the token head's output for it, with the tokens it kept."""

    token_ids: list[int] = field(default_factory=list)
    char_offsets: list[tuple[int, int]] = field(default_factory=list)  # special tokens: (0, 0)

    def output(self, key: Hashable) -> PoolingOutput:
        return replace(super().output(key), token_ids=_ids(self.token_ids), char_offsets=_offsets(self.char_offsets))


@dataclass
class StitchedTokensPlan(DocumentPlan):
    """Macro windows over the whole document; the kept states stitched, then the head once."""

    token_ids: list[int] = field(default_factory=list)
    char_offsets: list[tuple[int, int]] = field(default_factory=list)
    head: "Head | None" = None
    params: PoolingParams = field(default_factory=PoolingParams)
    rows: list[int] | None = None  # the stitched states the head runs over (STEP: the step-tag positions); None: all
    _states: dict[int, torch.Tensor] = field(default_factory=dict)  # window index -> kept [n_kept, hidden]

    def __post_init__(self) -> None:
        self.wants_states = True

    def add(self, window_index: int, value: torch.Tensor) -> None:
        window = self.windows[window_index]
        keep_end = window.keep_end if window.keep_end is not None else len(window.token_ids)
        # A copy of the kept rows alone: a view would hold the whole batch's states until the document ends.
        self._states[window_index] = value[window.keep_start:keep_end].clone()

    def output(self, key: Hashable) -> PoolingOutput:
        if self.head is None or len(self._states) != len(self.windows):
            raise RuntimeError("StitchedTokensPlan.output() needs its head and every window's states")
        states = torch.cat([self._states[index] for index in range(len(self.windows))])  # [num_tokens, hidden]
        if self.rows is not None:
            states = states[torch.tensor(self.rows, dtype=torch.long, device=states.device)]  # [num_rows, hidden]
        with torch.inference_mode():
            (data,) = self.head.forward([states], (self.params,))
        if not isinstance(data, np.ndarray) or len(data) != len(self.token_ids):
            raise RuntimeError(f"the token head returned {getattr(data, 'shape', None)} for {len(self.token_ids)} kept tokens")
        return PoolingOutput(key, data, self.num_tokens, False, self.processed_tokens,
                             token_ids=_ids(self.token_ids), char_offsets=_offsets(self.char_offsets))


def _ids(token_ids: list[int]) -> np.ndarray:
    return np.asarray(token_ids, dtype=np.int32)


def _offsets(char_offsets: list[tuple[int, int]]) -> np.ndarray:
    return np.asarray(char_offsets, dtype=np.int32).reshape(-1, 2)
