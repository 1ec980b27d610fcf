"""One copy to the host per head call.

On a GPU every copy to the host waits for the device, so a head must not copy row by row: its rows
are grouped by what changes their math (a request's dimensions, normalize, activation), each group
is finished as one block, and all blocks leave in one copy (``to_host``: float32, precision.py),
split back on the host into one array per row. The arrays are views of that one host block, never
overlapping, so a caller that changes one row in place changes no other.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

import numpy as np
import torch

from poolq.engine.pooling.precision import to_host
from poolq.engine.request import SparseVector

K = TypeVar("K", bound=Hashable)
Finish = Callable[[torch.Tensor, K], torch.Tensor]  # (a group's block, the group's key) -> the finished block, row for row


def group_rows(keys: Sequence[K]) -> dict[K, list[int]]:
    """The rows of each key, keys in order of first appearance."""
    groups: dict[K, list[int]] = {}
    for row, key in enumerate(keys):
        groups.setdefault(key, []).append(row)
    return groups


def parts_to_host(parts: Sequence[torch.Tensor], copy: Callable[[torch.Tensor], np.ndarray] = to_host) -> list[np.ndarray]:
    """``parts`` (one dtype, one device) on the host with one ``copy``: flattened, concatenated, copied,
    and split back into views shaped like the parts."""
    if not parts:
        return []
    flat = parts[0].reshape(-1) if len(parts) == 1 else torch.cat([part.reshape(-1) for part in parts])
    host = copy(flat)
    offsets = np.cumsum([part.numel() for part in parts])[:-1]
    return [piece.reshape(part.shape) for piece, part in zip(np.split(host, offsets), parts)]


def sparse_to_host(vectors: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> list[SparseVector]:
    """(vocabulary ids, weights) per sequence, on the device, as SparseVectors: one copy for all ids
    (int32) and one for all weights (float32), not two per sequence."""
    ids = parts_to_host([token_ids for token_ids, _ in vectors], copy=_ids_to_host)
    weights = parts_to_host([token_weights for _, token_weights in vectors])
    return [SparseVector(i, w) for i, w in zip(ids, weights)]


def rows_to_host(block: torch.Tensor, keys: Sequence[K], finish: Finish) -> list[np.ndarray]:
    """``block[i]`` finished with its key's group, one host array per row, in row order."""
    _check_one_key_per_row(len(block), keys)
    groups = group_rows(keys)
    if len(groups) == 1:  # the common case: the whole block is one group, no gather
        ((key, _),) = groups.items()
        return list(to_host(finish(block, key)))
    finished = [finish(block[torch.tensor(rows, device=block.device)], key) for key, rows in groups.items()]
    return _in_row_order(groups, [list(host) for host in parts_to_host(finished)], len(keys))


def tokens_to_host(states: Sequence[torch.Tensor], keys: Sequence[K], finish: Finish) -> list[np.ndarray]:
    """``states[i]`` (``[n_i, ...]``) finished with its key's group, one host ``[n_i, ...]`` array per
    sequence, in order. ``finish`` maps token rows to output rows one for one."""
    _check_one_key_per_row(len(states), keys)
    groups = group_rows(keys)
    finished = [finish(_cat([states[row] for row in rows]), key) for key, rows in groups.items()]
    hosts = parts_to_host(finished)
    per_group = [_split_rows(host, [len(states[row]) for row in rows]) for host, rows in zip(hosts, groups.values())]
    return _in_row_order(groups, per_group, len(keys))


def _check_one_key_per_row(num_rows: int, keys: Sequence[object]) -> None:
    if len(keys) != num_rows:
        raise ValueError(f"a head was given {len(keys)} requests' params for {num_rows} sequences: one each is needed")


def _ids_to_host(ids: torch.Tensor) -> np.ndarray:
    return ids.to(torch.int32).cpu().numpy()


def _cat(tokens: list[torch.Tensor]) -> torch.Tensor:
    """The sequences' tokens as one block: a view where they lie back to back in one buffer (AllPool's
    spans of a batch in order), since a copy of the step's whole states costs more than the head saves."""
    first = tokens[0]
    if len(tokens) == 1:
        return first
    if _back_to_back(tokens):
        return first.as_strided((sum(len(t) for t in tokens), *first.shape[1:]), first.stride())
    return torch.cat(tokens)


def _back_to_back(tokens: list[torch.Tensor]) -> bool:
    first = tokens[0]
    storage, size = first.untyped_storage().data_ptr(), first.element_size()
    end = first.data_ptr()
    for t in tokens:
        if (not t.is_contiguous() or t.dtype != first.dtype or t.shape[1:] != first.shape[1:]
                or t.untyped_storage().data_ptr() != storage or (t.numel() and t.data_ptr() != end)):
            return False
        end += t.numel() * size
    return True


def _split_rows(host: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    return np.split(host, np.cumsum(lengths)[:-1])


def _in_row_order(groups: dict[K, list[int]], per_group: list[list[np.ndarray]], num_rows: int) -> list[np.ndarray]:
    out: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * num_rows
    for rows, arrays in zip(groups.values(), per_group):
        for row, array in zip(rows, arrays):
            out[row] = array
    return out
