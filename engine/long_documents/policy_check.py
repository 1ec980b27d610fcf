"""Checks of a long-document policy against a model, done once per job or run. No torch here."""
from __future__ import annotations

from poolq.engine.model_spec import ModelSpec, PoolingType
from poolq.engine.request import LongDocumentMode, LongDocumentPolicy, PoolingTask

_ONE_ROW = (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE)
# The long-document modes each task can follow, declared once. ``chunked`` combines windows by
# the task's own rule (embed: token-weighted mean, renormalized; classify: token-weighted mean of
# logits, then the activation; sparse: SPLADE's max (or sum) over tokens, taken over windows).
# Late chunking mean-pools chunk token states into vectors: embed only. The token tasks'
# ``chunked`` stitches macro windows so that every token has exactly one state (token_plans.py).
MODES_BY_TASK: dict[PoolingTask, tuple[LongDocumentMode, ...]] = {
    PoolingTask.EMBED: tuple(LongDocumentMode),
    PoolingTask.SPARSE_EMBED: (*_ONE_ROW, LongDocumentMode.CHUNKED, LongDocumentMode.NAIVE_CHUNKS),
    PoolingTask.CLASSIFY: (*_ONE_ROW, LongDocumentMode.CHUNKED, LongDocumentMode.NAIVE_CHUNKS),
    PoolingTask.TOKEN_EMBED: (*_ONE_ROW, LongDocumentMode.CHUNKED),
    PoolingTask.TOKEN_CLASSIFY: (*_ONE_ROW, LongDocumentMode.CHUNKED),
}


class PolicyError(ValueError):
    """A long-document policy this model cannot follow; ``field`` names the offending option."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def resolve_window(spec: ModelSpec, policy: LongDocumentPolicy) -> int:
    window = policy.window_tokens or spec.window_tokens
    if not 1 <= window <= spec.max_position_tokens:
        raise PolicyError("window_tokens", f"window_tokens={window} is outside 1..{spec.max_position_tokens} for this model")
    return window


def default_overlap(policy: LongDocumentPolicy, window: int) -> int:
    return policy.overlap_tokens if policy.overlap_tokens is not None else window // 4


def check_task_mode(task: PoolingTask, mode: LongDocumentMode) -> None:
    """Raise :class:`PolicyError` if ``task`` cannot follow long-document ``mode``."""
    served = MODES_BY_TASK[task]
    if mode not in served:
        raise PolicyError("mode", f"long_documents.mode={mode.value!r} does not apply to task {task.value!r}; "
                                  f"it takes {', '.join(repr(m.value) for m in served)}")


def check_multi_task_mode(mode: LongDocumentMode) -> None:
    """Several tasks from one forward pass share its one window: ``error`` or ``truncate``."""
    if mode not in _ONE_ROW:
        raise PolicyError("mode", f"long_documents.mode={mode.value!r} does not apply to several tasks at once; "
                                  "they take 'error' or 'truncate'")


def check_policy(spec: ModelSpec, policy: LongDocumentPolicy, task: PoolingTask | None = None,
                 special_tokens: int = 0) -> int:
    """Raise :class:`PolicyError` for a policy the model (and ``task``, if given) cannot follow;
    return the window. ``special_tokens``: those its tokenizer puts around a text, where known."""
    window = resolve_window(spec, policy)
    if window <= special_tokens:
        raise PolicyError("window_tokens", f"a window of {window} tokens leaves no room next to the model's "
                                           f"{special_tokens} special tokens")
    mode = policy.mode
    if task is not None:
        check_task_mode(task, mode)
    if mode is LongDocumentMode.LATE_CHUNKS and spec.pooling is not PoolingType.MEAN and not policy.allow_any_pooling:
        raise PolicyError(
            "allow_any_pooling",
            f"late chunking mean-pools chunk token states, but this model pools with {spec.pooling.value}: its token "
            "states are not trained to be averaged; set allow_any_pooling to use it anyway",
        )
    # Late chunks and a token task's chunked mode step overlapping windows of the model's length by
    # window - overlap: an overlap of a whole window would never step.
    if mode in (LongDocumentMode.LATE_CHUNKS, LongDocumentMode.CHUNKED) and default_overlap(policy, window) >= window:
        raise PolicyError("overlap_tokens", f"overlap_tokens={policy.overlap_tokens} must be below the window ({window})")
    if policy.max_embed_len is not None and mode is not LongDocumentMode.CHUNKED and policy.max_embed_len > window:
        raise PolicyError("max_embed_len",
                          f"max_embed_len={policy.max_embed_len} exceeds the window ({window}) outside chunked mode")
    return window


# What a route answering one result per input takes (``/v1/embeddings``, a batch's requests)
ONE_RESULT_MODES = tuple(mode for mode in LongDocumentMode if not mode.chunk_rows)
_HINT_OPENING = " (set "  # every hint a too-long error ends with: `` (set <field> to 'a' or 'b')``


def longer_document_modes(tasks: tuple[PoolingTask, ...], pair: bool = False) -> tuple[LongDocumentMode, ...]:
    """The modes that take a document longer than the window for ``tasks`` (a text pair: truncation only)."""
    if pair or len(tasks) > 1:
        return (LongDocumentMode.TRUNCATE,)
    return tuple(mode for mode in MODES_BY_TASK[tasks[0]] if mode is not LongDocumentMode.ERROR)


def mode_hint(modes: tuple[LongDocumentMode, ...], field: str = "long_documents.mode") -> str:
    """`` (set long_documents.mode to 'truncate', 'chunked' or 'naive_chunks')``: what a too-long error suggests."""
    names = [repr(mode.value) for mode in modes]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"{_HINT_OPENING}{field} to {listed})"


def narrow_mode_hint(message: str, accepted: tuple[LongDocumentMode, ...], field: str) -> str:
    """``message`` with its mode hint (``mode_hint``) listing only the modes of ``accepted`` it named,
    and ``field`` where the caller sets them: a route suggests only what it takes."""
    cut = message.rfind(_HINT_OPENING)
    if cut < 0 or not message.endswith(")"):
        return message
    named = tuple(mode for mode in accepted if repr(mode.value) in message[cut:])
    return message[:cut] + (mode_hint(named, field) if named else "")
