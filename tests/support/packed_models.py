"""Running tiny HF models packed and one sequence at a time: the parity checks of the packed forwards."""
import numpy as np
import torch


def cu_seqlens(lengths: list[int]) -> torch.Tensor:  # [num_seqs + 1] int32
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)


def random_ids(lengths: list[int], vocab_size: int, seed: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab_size, (n,), generator=generator) for n in lengths]


def packed_run(encoder: torch.nn.Module, ids: list[torch.Tensor]) -> torch.Tensor:  # [num_tokens, hidden]
    """``encoder`` (a packed forward) over ``ids`` back to back, positions restarting per sequence."""
    lengths = [len(x) for x in ids]
    with torch.inference_mode():
        return encoder(torch.cat(ids), torch.cat([torch.arange(n) for n in lengths]), cu_seqlens(lengths), max(lengths))


def hf_alone(model: torch.nn.Module, ids: list[torch.Tensor]) -> torch.Tensor:  # [num_tokens, hidden]
    """transformers' own forward of each sequence alone (no padding), back to back."""
    with torch.inference_mode():
        return torch.cat([model(input_ids=x[None]).last_hidden_state[0] for x in ids])


def min_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """The lowest per-token cosine between two [num_tokens, hidden] tensors, in float32."""
    return float(torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).min())
