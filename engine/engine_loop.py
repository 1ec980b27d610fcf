"""The engine's loop: one stream of requests through the model, one step at a time.

A helper thread plans requests (tokenizes them, cuts long documents into windows) up to
``lookahead_tokens`` ahead of the model; each :meth:`EngineLoop.step` runs one batch of
windows (about ``max_num_batched_tokens``) and folds its pooled outputs into the plans. A step
reports what it did (:class:`StepOutput`): the tokens it ran, the requests it finished, the
partial progress of requests still under way. Between two steps a caller can report progress,
stop (cancel), or let an urgent request have the engine (``EngineTurns``).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Callable, Iterable, Iterator, Sequence

from poolq.engine.batch import BatchMetadata
from poolq.engine.config import EngineConfig
from poolq.engine.loading.model_loader import LoadedModel
from poolq.engine.long_documents.policy_check import longer_document_modes, mode_hint, resolve_window
from poolq.engine.long_documents.window_planner import WindowPlanner
from poolq.engine.long_documents.window_plans import DocumentPlan, SinglePlan, Window
from poolq.engine.pooling.dispatcher import UnsupportedTaskError
from poolq.engine.pooling.model_truncation import cut_to_model_size
from poolq.engine.request import (
    EngineResult,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingRequest,
    PoolingTask,
    RequestError,
)
from poolq.engine.scheduling.scheduler import Scheduler, SchedulingOrder
from poolq.engine.scheduling.step import RequestProgress, StepOutput
from poolq.engine.scheduling.step_retry import OUT_OF_MEMORY_CODE, OutOfMemory, run_in_halves, select_rows
from poolq.engine.turns import EngineTurns

# Requests tokenized per tokenizer call while planning ahead.
_TOKENIZE_GROUP = 64
# How long a step waits for planning before it reports a step of no tokens (so a caller between
# steps still gets its turn while a very long document is tokenized).
_PLANNING_WAIT_S = 0.5


@dataclass
class _Planned:
    """What the planning thread produced in one go, in input order."""

    requests: list[PoolingRequest]
    plans: list[DocumentPlan | RequestError]
    chars: int
    exhausted: bool


@dataclass
class _Live:
    """A planned request whose windows are not all through the model yet."""

    index: int
    request: PoolingRequest
    plan: DocumentPlan
    windows_left: int
    tokens_done: int = 0

    @property
    def tokens_total(self) -> int:
        return self.plan.processed_tokens


@dataclass
class _Ran:
    """What one step's batch did: the requests it ran that are still live, those it failed, its tokens."""

    touched: list[_Live] = field(default_factory=list)
    failed: list[EngineResult] = field(default_factory=list)
    tokens: int = 0


class EngineLoop:
    def __init__(self, model: LoadedModel, config: EngineConfig, turns: EngineTurns, order: SchedulingOrder,
                 requests: Iterable[PoolingRequest], policy: LongDocumentPolicy | None = None, *,
                 urgent: bool = False) -> None:
        self.model, self.config, self.turns, self.urgent = model, config, turns, urgent
        policy = policy or LongDocumentPolicy()
        self.planner = WindowPlanner(model.tokenizer, model.spec, policy, resolve_window(model.spec, policy),
                                     model.dispatcher, config.max_chunks_per_document)
        self.scheduler = Scheduler(config.max_num_batched_tokens, config.max_num_seqs, order)
        self._requests = iter(requests)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poolq-tokenize")
        self._planning: Future[_Planned] | None = self._pool.submit(self._plan_ahead, config.lookahead_tokens)
        self._exhausted = False
        self._next_index = 0
        self._live: dict[int, _Live] = {}  # request index -> its plan
        self._owners: dict[int, tuple[int, int]] = {}  # sequence -> (request index, window index)
        self._next_sequence = 0
        self._done: dict[int, EngineResult] = {}  # finished, waiting for their turn in input order
        self._next_out = 0

    # -- stepping ------------------------------------------------------------------------------
    def step(self) -> StepOutput | None:
        """Run one step; None once every request is finished and handed out."""
        finished, planned_tokens, planned_chars = self._take_planned(wait=not self.scheduler.pending_tokens)
        if not self.scheduler.pending_tokens:
            if self._planning is not None or finished:
                return StepOutput(0, tuple(finished), (), planned_tokens, planned_chars)
            return None
        batch = self.scheduler.schedule()
        if batch is None:  # pragma: no cover - pending tokens mean a batch
            raise RuntimeError("the scheduler had pending tokens but made no batch")
        owners = [self._owners.pop(sequence) for sequence in batch.seq_indices]
        # The windows of a request that failed in an earlier step (out of memory) are dropped unrun.
        rows = [row for row, (index, _) in enumerate(owners) if index in self._live]
        ran = self._run(select_rows(batch, rows), [owners[row] for row in rows]) if rows else _Ran()
        finished += ran.failed + self._finish([live for live in ran.touched if not live.windows_left])
        in_progress = tuple(RequestProgress(live.request.key, live.tokens_done, live.tokens_total)
                            for live in ran.touched if live.windows_left)
        self._plan_more()
        return StepOutput(ran.tokens, tuple(finished), in_progress, planned_tokens, planned_chars)

    def _run(self, batch: BatchMetadata, owners: list[tuple[int, int]]) -> _Ran:
        """Run one batch (in halves where memory runs out: ``step_retry``) and fold each window's output
        into its plan."""
        lives = [self._live[index] for index, _ in owners]
        wants_pooled = [None if live.plan.wants_states else _pooled_as(live.request, live.plan) for live in lives]

        def run(part: BatchMetadata, rows: Sequence[int]) -> list:
            hidden_states = self.model.runner.forward(part)  # [num_tokens, hidden]
            wants = [wants_pooled[row] for row in rows]
            pooled = self.model.dispatcher.forward(hidden_states, part, wants)
            return [hidden_states[int(part.cu_seqlens[i]):int(part.cu_seqlens[i + 1])] if want is None else pooled[i]
                    for i, want in enumerate(wants)]

        ran = _Ran()
        with self.turns.step(self.urgent):
            outputs = run_in_halves(batch, run)
            for live, (_, window_index), output, tokens in zip(lives, owners, outputs, batch.seq_lens.tolist()):
                if live.index not in self._live:  # an earlier window of this step failed it
                    continue
                if isinstance(output, OutOfMemory):
                    ran.failed.append(self._fail(live, output))
                    continue
                live.plan.add(window_index, output)
                live.windows_left -= 1
                live.tokens_done += tokens
                ran.tokens += tokens
        ran.touched = [live for live in {live.index: live for live in lives}.values() if live.index in self._live]
        return ran

    def results(self, on_step: Callable[[StepOutput], None] | None = None) -> Iterator[EngineResult]:
        """Every request's result in input order, as soon as it and all before it are finished;
        ``on_step`` sees each step first (it may raise to stop the loop)."""
        try:
            while (output := self.step()) is not None:
                if on_step is not None:
                    on_step(output)
                yield from self.take_in_order()
        finally:
            self.close()

    def take_in_order(self) -> list[EngineResult]:
        """The finished results whose turn in input order has come (each handed out once)."""
        ready = []
        while self._next_out in self._done:
            ready.append(self._done.pop(self._next_out))
            self._next_out += 1
        return ready

    def close(self) -> None:
        """Stop planning ahead (a loop left early, say a cancelled shard, tokenizes no more)."""
        if self._planning is not None:
            self._planning.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- planning ahead ------------------------------------------------------------------------
    def _take_planned(self, wait: bool) -> tuple[list[EngineResult], int, int]:
        """Add what the planning thread has finished to the scheduler (waiting a little for it
        when the model has nothing to run); returns the planning errors and what was planned."""
        if self._planning is None:
            return [], 0, 0
        try:
            planned = self._planning.result(timeout=_PLANNING_WAIT_S if wait else 0)
        except FutureTimeout:
            return [], 0, 0
        self._planning = None
        self._exhausted = planned.exhausted
        errors: list[EngineResult] = []
        tokens = 0
        for request, plan in zip(planned.requests, planned.plans):
            index, self._next_index = self._next_index, self._next_index + 1
            if isinstance(plan, RequestError):
                self._done[index] = plan
                errors.append(plan)
                continue
            self._live[index] = _Live(index, request, plan, len(plan.windows))
            tokens += plan.processed_tokens
            for window_index, window in enumerate(plan.windows):
                self.scheduler.add(self._next_sequence, window.token_ids, window.token_type_ids)
                self._owners[self._next_sequence] = (index, window_index)
                self._next_sequence += 1
        self._plan_more()
        return errors, tokens, planned.chars

    def _plan_more(self) -> None:
        """Keep ``lookahead_tokens`` planned ahead of the model."""
        room = self.config.lookahead_tokens - self.scheduler.pending_tokens
        if self._planning is None and not self._exhausted and room > 0:
            self._planning = self._pool.submit(self._plan_ahead, room)

    def _plan_ahead(self, budget_tokens: int) -> _Planned:
        """Plan requests (in the planning thread) until ``budget_tokens`` are planned or none are left."""
        planned = _Planned([], [], 0, exhausted=False)
        tokens = 0
        while tokens < budget_tokens:
            group = list(islice(self._requests, _TOKENIZE_GROUP))
            if not group:
                planned.exhausted = True
                break
            plans = self._plan(group)
            planned.requests += group
            planned.plans += plans
            planned.chars += sum(len(request.text) + len(request.text_pair or "") for request in group)
            tokens += sum(plan.processed_tokens for plan in plans if not isinstance(plan, RequestError))
        return planned

    def _plan(self, group: list[PoolingRequest]) -> list[DocumentPlan | RequestError]:
        planner, tokenizer = self.planner, self.model.tokenizer
        singles = [r.text for r in group if r.text_pair is None and r.token_ids is None]
        offsets: Sequence[list[tuple[int, int]] | None]
        if planner.policy.mode.chunk_rows or any(task.per_token for request in group for task in request.all_tasks):
            content_ids, offsets = tokenizer.tokenize_with_offsets(singles) if singles else ([], [])
        else:
            content_ids, offsets = (tokenizer.count_and_tokenize(singles) if singles else []), [None] * len(singles)
        contents = iter(zip(content_ids, offsets))
        plans: list[DocumentPlan | RequestError] = []
        for request in group:
            if request.token_ids is not None:  # given as the model's token ids: nothing to tokenize
                plans.append(self._check(request, planner.plan(request, list(request.token_ids), None)))
            elif request.text_pair is None:
                plans.append(self._check(request, planner.plan(request, *next(contents))))
            else:
                plans.append(self._plan_pair(request))
        return plans

    def _plan_pair(self, request: PoolingRequest) -> DocumentPlan | RequestError:
        planner, mode = self.planner, self.planner.policy.mode
        item = self.model.tokenizer.tokenize_pair(request.text, request.text_pair or "", planner.window,
                                                  mode is LongDocumentMode.TRUNCATE)
        if item is None:
            return RequestError(request.key, "query_too_long", f"the first text of the pair fills the model's window of "
                                f"{planner.window} tokens on its own")
        modes = longer_document_modes(request.all_tasks, pair=True)
        # A pair is one sequence that no chunk mode can cut: beyond the window it takes error or truncate only.
        if item.truncated and mode not in (LongDocumentMode.ERROR, *modes):
            return RequestError(request.key, "unsupported_mode",
                                f"the text pair has {item.num_tokens} tokens, more than the model's window of "
                                f"{planner.window}, and long_documents.mode={mode.value!r} does not apply to a text pair"
                                + mode_hint(modes))
        plan = SinglePlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated)
        return self._check(request, plan)

    def _check(self, request: PoolingRequest, plan: DocumentPlan | RequestError) -> DocumentPlan | RequestError:
        if isinstance(plan, RequestError):
            return plan
        model, planner = self.model, self.planner
        try:
            for task in request.all_tasks:
                model.dispatcher.check(task)
        except UnsupportedTaskError as exc:
            return RequestError(request.key, "unsupported_task", str(exc))
        dims = request.params.dimensions
        sizes = {PoolingTask.EMBED: model.output_dim, PoolingTask.TOKEN_EMBED: model.token_output_dim}
        for task in request.all_tasks:
            if dims is not None and task in sizes and dims > sizes[task]:
                return RequestError(request.key, "invalid_dimensions", f"dimensions={dims} exceeds the model's {sizes[task]}")
        if plan.truncated and planner.policy.mode is LongDocumentMode.ERROR:
            return RequestError(
                request.key,
                "document_too_long",
                f"document has {plan.num_tokens} tokens; the model's window is {planner.window}"
                + mode_hint(longer_document_modes(request.all_tasks, pair=request.text_pair is not None)),
            )
        return plan

    def _fail(self, live: _Live, oom: OutOfMemory) -> RequestError:
        """The request ends here, as an error (its windows still pending are dropped when scheduled)."""
        del self._live[live.index]
        error = RequestError(live.request.key, OUT_OF_MEMORY_CODE,
                             f"the model ran out of memory on a window of {oom.tokens} tokens even alone (the request "
                             f"has {live.tokens_total} tokens in all): {oom.reason}")
        self._done[live.index] = error
        return error

    def _finish(self, lives: list[_Live]) -> list[EngineResult]:
        results: list[EngineResult] = []
        for live in lives:
            del self._live[live.index]
            result = cut_to_model_size(live.plan.output(live.request.key), live.request, self.model.spec.truncate_dim)
            self._done[live.index] = result
            results.append(result)
        return results


def _pooled_as(request: PoolingRequest, plan: DocumentPlan) -> PoolingRequest:
    """The request a window is pooled for: with its plan's params where they differ (chunked classify pools logits)."""
    return request if plan.pool_params is None else replace(request, params=plan.pool_params)
