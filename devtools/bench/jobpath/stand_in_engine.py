"""A stand-in engine, for benchmarks only: the real engine with its model's forward replaced by a
stand-in that computes nothing (`poolq bench jobpath`).

Everything around the forward stays real: the tokenizer, the window planner, the scheduler, the
engine's loop and its steps, the pooling and heads (projector, normalization) and the one copy of
each output to the host. The forward returns states of the model's hidden size, dtype and device, cut
from one block of fixed values filled once: a job runs as it would on a device fast enough to take no
time at all, so what is left is the job path's own cost. Nothing in the product selects it: a benchmark
builds it and hands it to a context's engine pool (``EnginePool.use``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import torch

from poolq.engine import EngineConfig, PoolingEngine
from poolq.engine.batch import BatchMetadata
from poolq.engine.runners.runner import torch_dtype

# Hidden states as float values: an int8 engine's states are float32 (only its GEMMs run in int8).
_STATE_DTYPES = {"int8": "float32"}


class StandInRunner:
    """The runners' interface (``forward(batch) -> [num_tokens, hidden]``) without a model.

    Every call returns a view of one block of fixed, finite, non-zero values (grown when a batch is
    longer than any before): row ``i`` does not depend on the tokens, so a step costs the slicing and
    nothing else. Callers only read the states (pooling, heads), as they read a real forward's.
    ``steps`` and ``tokens`` count what went through, for per-step figures."""

    def __init__(self, hidden_size: int, dtype: torch.dtype, device: torch.device, rows: int = 0) -> None:
        if hidden_size < 1:
            raise ValueError(f"a stand-in runner needs a hidden size of at least 1, got {hidden_size}")
        self.hidden_size, self.dtype, self.device = hidden_size, dtype, device
        self._states = _fixed_states(rows, hidden_size, dtype, device)  # filled now, not in a timed step
        self.steps = 0
        self.tokens = 0

    def forward(self, batch: BatchMetadata) -> torch.Tensor:  # [num_tokens, hidden]
        if batch.num_tokens > len(self._states):
            self._states = _fixed_states(max(batch.num_tokens, 2 * len(self._states)), self.hidden_size, self.dtype, self.device)
        self.steps += 1
        self.tokens += batch.num_tokens
        return self._states[: batch.num_tokens]


def _fixed_states(rows: int, hidden: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Values in 1/8..2, varying by row and column (a mean over any span is finite and non-zero)."""
    row = torch.arange(rows, device=device).remainder(13).unsqueeze(1)
    column = torch.arange(hidden, device=device).remainder(7).unsqueeze(0)
    return ((row + column + 1) / 8).to(dtype)


def stand_in_for(engine: PoolingEngine) -> PoolingEngine:
    """An engine sharing ``engine``'s tokenizer, spec, poolers and config, whose forward is a
    :class:`StandInRunner` of its model's hidden size, dtype and device."""
    dtype = torch_dtype(_STATE_DTYPES.get(engine.config.dtype, engine.config.dtype))
    runner = StandInRunner(engine.spec.hidden_size, dtype, torch.device(engine.config.device),
                           rows=engine.config.max_num_batched_tokens)
    # The stand-in has the runner's interface without its class (it must not hold the model's weights).
    stand_in = PoolingEngine(replace(engine.loaded, runner=cast(Any, runner)), engine.config)
    # The engine picks its scheduling order from its runner's class; keep the real runner's (packed: arrival
    # order), or the stand-in would schedule as a padded runner does and measure another loop.
    stand_in.scheduling_order = engine.scheduling_order
    return stand_in


def stand_in_engine(model: str, *, dtype: str = "float32", config: EngineConfig | None = None) -> PoolingEngine:
    """The stand-in for ``model`` (a packaged name or a model directory), loaded once as the real engine
    would be (its weights too: the poolers' layers are real), then given a stand-in forward."""
    return stand_in_for(PoolingEngine.from_pretrained(model, dtype=dtype, config=config))


def stand_in_runner(engine: PoolingEngine) -> StandInRunner:
    """The stand-in runner of an engine :func:`stand_in_for` built (its step and token counts)."""
    if not isinstance(engine.runner, StandInRunner):
        raise TypeError(f"the engine runs a {type(engine.runner).__name__}, not a stand-in: build it with stand_in_for")
    return engine.runner
