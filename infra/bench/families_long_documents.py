"""Long documents through the families users pick: poolq packed beside sentence-transformers (not a test).

Two seeded random-weight models at a realistic size, built from transformers' config classes and
saved by sentence-transformers itself (Transformer + Pooling + Normalize):

- ModernBERT-shaped (hidden 768, 12 layers, 12 heads, intermediate 1152, global attention every 3
  layers, local window 128, 8,192 positions), mean pooling;
- Qwen3-shaped (hidden 1024, 16 heads, 8 K/V heads, head size 128, intermediate 3072, 8,192
  positions; 28 layers is Qwen3-Embedding-0.6B, ``--qwen3-layers`` cuts it), last-token pooling.

Both share one WordPiece tokenizer (vocabulary 8,192) trained here on the demo corpus
(``devtools/demo/sample_corpus.jsonl``), ``[CLS] text [SEP]``. The documents are cut from that
corpus' text, repeated: a few of ~8k tokens and several of 200-1,000 (``--lengths``), so a padded
batch pads. poolq runs ``PoolingEngine.embed`` (packed runner, TRUNCATE at 8,192 tokens) and
sentence-transformers ``SentenceTransformer.encode(texts, batch_size=...)`` (its padded path) in the
same dtype: float32 and the machine's ``auto`` (bf16 where the CPU has native bf16). Every round runs
each (system, dtype) once, in an order rotated round by round, because a shared machine's speed
drifts; medians are reported with the median of the per-round ratios. Tokens/s counts real tokens,
specials included (both systems tokenize alike). Agreement: per-vector cosine between the two
systems' vectors after centring both on the sentence-transformers batch mean (random weights make raw
vectors nearly parallel). Peak memory: the largest RSS growth during one call, sampled every 5 ms.

    python infra/bench/families_long_documents.py [--rounds 3] [--threads 2] [--qwen3-layers 8]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WINDOW = 8192
DEFAULT_LENGTHS = (8000, 1000, 500, 250)  # tokens per document, specials included
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..4, in this order
Encode = Callable[[list[str]], np.ndarray]  # texts -> [n, d]


@dataclass(frozen=True)
class Family:
    """One model to build: its transformers config class and values, and its sentence-transformers pooling."""

    name: str
    config_class: str
    config: dict
    pooling: str

    def with_config(self, **overrides) -> "Family":
        return replace(self, config={**self.config, **overrides})


_IDS = dict(pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
MODERNBERT = Family("ModernBERT", "ModernBertConfig", dict(
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1152,
    global_attn_every_n_layers=3, local_attention=128, max_position_embeddings=WINDOW, **_IDS), "mean")
QWEN3 = Family("Qwen3", "Qwen3Config", dict(
    hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    intermediate_size=3072, max_position_embeddings=WINDOW, pad_token_id=0, bos_token_id=2, eos_token_id=3), "lasttoken")


@dataclass
class Measured:
    """One (system, dtype) of one family: seconds and peak RSS growth per round, its last vectors."""

    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))


def train_tokenizer(directory: Path, vocab_size: int) -> None:
    """A lower-casing WordPiece tokenizer of ``vocab_size`` trained on the demo corpus, saved as transformers saves one."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(corpus_texts(), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS)))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(directory)


def corpus_texts() -> list[str]:
    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    return [document["text"] for document in load_sample_corpus()]


def build_model(family: Family, tokenizer_dir: Path, directory: Path, seed: int = 0) -> Path:
    """``family`` with weights from ``seed`` and the tokenizer of ``tokenizer_dir``, saved by sentence-transformers."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules

    transformers.utils.logging.disable_progress_bar()  # saving and loading bars would bury the rounds
    base = directory / "hf"
    vocab_size = len(transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)))
    config = getattr(transformers, family.config_class)(vocab_size=vocab_size, **family.config)
    torch.manual_seed(seed)
    transformers.AutoModel.from_config(config).eval().save_pretrained(base)
    transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(base)
    transformer = modules.Transformer(str(base), max_seq_length=WINDOW)
    pooling = modules.Pooling(config.hidden_size, pooling_mode=family.pooling)
    saved = directory / "saved"
    model = SentenceTransformer(modules=[transformer, pooling, modules.Normalize()], device="cpu")
    model.save(str(saved), create_model_card=False)
    return saved


def documents(tokenizer, lengths: tuple[int, ...], seed: int = 0) -> list[str]:
    """One text per length, cut at a token boundary from the corpus (repeated) at a random start,
    so that it tokenizes to about that many tokens, ``[CLS]`` and ``[SEP]`` included."""
    stream = "\n\n".join(corpus_texts())
    stream = "\n\n".join([stream] * (2 + max(lengths) * 5 // len(stream)))  # ~5 characters a token, with room
    offsets = tokenizer(stream, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    rng = np.random.default_rng(seed)
    texts = []
    for length in lengths:
        start = int(rng.integers(0, len(offsets) - length))
        texts.append(stream[offsets[start][0]: offsets[start + length - 3][1]])
    return texts


class RssPeak:
    """The largest growth of this process' RSS over its value at entry, sampled while the block runs."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._stop = threading.Event()
        self.peak_mb = 0.0

    def _rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self._page

    def _sample(self, start: int) -> None:
        while not self._stop.wait(0.005):
            self.peak_mb = max(self.peak_mb, (self._rss() - start) / 2**20)

    def __enter__(self) -> "RssPeak":
        self._thread = threading.Thread(target=self._sample, args=(self._rss(),), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def encoders(model_dir: Path, dtypes: list[str], batch_size: int) -> dict[tuple[str, str], Encode]:
    """``(system, dtype) -> encode(texts) -> [n, d]`` for poolq (packed) and sentence-transformers, each dtype."""
    from sentence_transformers import SentenceTransformer

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine
    from poolq.engine.packed_runner import PackedRunner
    from poolq.engine.runner import torch_dtype

    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=WINDOW)
    found: dict[tuple[str, str], Encode] = {}
    for dtype in dtypes:
        engine = PoolingEngine.from_pretrained(str(model_dir), dtype=dtype)
        if not isinstance(engine.runner, PackedRunner):
            raise RuntimeError(f"{model_dir}: the engine chose {type(engine.runner).__name__}, not the packed runner")
        st = SentenceTransformer(str(model_dir), device="cpu").to(torch_dtype(engine.config.dtype))
        found["poolq packed", dtype] = partial(_poolq_encode, engine, policy)
        found["ST padded", dtype] = partial(_st_encode, st, batch_size)
    return found


def _poolq_encode(engine, policy, texts: list[str]) -> np.ndarray:
    return np.asarray(engine.embed(texts, policy=policy))


def _st_encode(st, batch_size: int, texts: list[str]) -> np.ndarray:
    return st.encode(texts, batch_size=batch_size, convert_to_tensor=True).float().numpy()  # numpy has no bf16


def measure(encode: dict[tuple[str, str], Encode], texts: list[str], rounds: int) -> dict[tuple[str, str], Measured]:
    """Every round runs each encoder once on all ``texts``, the order rotated by one each round."""
    keys = list(encode)
    for key in keys:
        encode[key](texts[-1:])  # warm-up: lazy initialisation, first-call kernels
    results = {key: Measured() for key in keys}
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[: r % len(keys)]:
            with RssPeak() as rss:
                start = time.perf_counter()
                vectors = encode[key](texts)
                results[key].seconds.append(time.perf_counter() - start)
            results[key].peak_mb.append(rss.peak_mb)
            results[key].vectors = np.asarray(vectors, dtype=np.float32)
        print(f"  round {r + 1}: " + ", ".join(f"{' '.join(k)} {results[k].seconds[-1]:.1f}s" for k in keys), flush=True)
    return results


def centred_cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per-row cosine after centring both on ``theirs``' mean."""
    mean = theirs.mean(0, keepdims=True)
    a, b = ours - mean, theirs - mean
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def run_family(family: Family, tokenizer_dir: Path, texts: list[str], *, dtypes: list[str], rounds: int,
               batch_size: int) -> list[dict]:
    """One row per dtype: tokens/s of each system (medians), the median per-round ratio, cosines, peak RSS."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tokens = sum(min(len(ids), WINDOW) for ids in tokenizer(texts)["input_ids"])
    with tempfile.TemporaryDirectory() as scratch:
        encode = encoders(build_model(family, tokenizer_dir, Path(scratch)), dtypes, batch_size)
        results = measure(encode, texts, rounds)
    rows = []
    for dtype in dtypes:
        ours, theirs = results["poolq packed", dtype], results["ST padded", dtype]
        cosines = centred_cosines(ours.vectors, theirs.vectors)
        rows.append({
            "family": family.name, "layers": family.config["num_hidden_layers"], "dtype": dtype, "texts": len(texts),
            "tokens": tokens, "poolq_tok_s": tokens / statistics.median(ours.seconds),
            "st_tok_s": tokens / statistics.median(theirs.seconds),
            "ratio": statistics.median(t / o for o, t in zip(ours.seconds, theirs.seconds)),
            "ratios": [t / o for o, t in zip(ours.seconds, theirs.seconds)],
            "min_centred_cosine": float(cosines.min()), "mean_centred_cosine": float(cosines.mean()),
            **reference_cosines(results, dtype),
            "poolq_peak_mb": max(ours.peak_mb), "st_peak_mb": max(theirs.peak_mb),
        })
    return rows


def reference_cosines(results: dict[tuple[str, str], Measured], dtype: str) -> dict[str, float]:
    """Each system's lowest centred cosine to sentence-transformers float32 (where it ran): what the dtype
    itself costs, beside which the two systems' disagreement in that dtype can be judged."""
    reference = results.get(("ST padded", "float32"))
    if reference is None:
        return {}
    return {f"{system}_min_cos_to_st_fp32": float(centred_cosines(results[name, dtype].vectors, reference.vectors).min())
            for system, name in (("poolq", "poolq packed"), ("st", "ST padded"))}


def markdown(rows: list[dict]) -> str:
    lines = ["| family | dtype | tokens | poolq tok/s | ST tok/s | ratio (median) | per-round ratios | min centred cos poolq-ST "
             "| ... poolq / ST to ST fp32 | peak RSS growth poolq / ST (MB) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        to_fp32 = "/".join(f"{row[k]:.5f}" for k in ("poolq_min_cos_to_st_fp32", "st_min_cos_to_st_fp32") if k in row)
        lines.append(f"| {row['family']} ({row['layers']} layers) | {row['dtype']} | {row['tokens']:,} ({row['texts']} docs) "
                     f"| {row['poolq_tok_s']:,.0f} | {row['st_tok_s']:,.0f} | **{row['ratio']:.2f}×** "
                     f"| {', '.join(f'{r:.2f}' for r in row['ratios'])} | {row['min_centred_cosine']:.5f} | {to_fp32 or '-'} "
                     f"| {row['poolq_peak_mb']:,.0f} / {row['st_peak_mb']:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2, help="sentence-transformers' encode batch size")
    parser.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)), help="tokens per document")
    parser.add_argument("--modernbert-layers", type=int, default=6, help="12 is the real shape; 6 keeps its 1:2 global:local mix")
    parser.add_argument("--qwen3-layers", type=int, default=4, help="28 is Qwen3-Embedding-0.6B")
    parser.add_argument("--families", default="modernbert,qwen3")
    parser.add_argument("--dtypes", default="float32,auto")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    import torch

    from poolq.engine.hardware import cpu_model, noted_flags, resolve_dtype

    torch.set_num_threads(args.threads)
    dtypes = list(dict.fromkeys(resolve_dtype(d, "cpu") for d in args.dtypes.split(",")))
    families = {"modernbert": MODERNBERT.with_config(num_hidden_layers=args.modernbert_layers),
                "qwen3": QWEN3.with_config(num_hidden_layers=args.qwen3_layers)}
    lengths = tuple(int(n) for n in args.lengths.split(","))
    print(f"{datetime.date.today()}; {cpu_model()}; flags: {', '.join(noted_flags()) or 'none noted'}; "
          f"{os.cpu_count()} logical cores, torch threads {args.threads}; dtypes {', '.join(dtypes)} "
          f"(auto = {resolve_dtype('auto', 'cpu')}); ST batch size {args.batch_size}")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        train_tokenizer(Path(scratch), args.vocab)
        import transformers

        texts = documents(transformers.AutoTokenizer.from_pretrained(scratch), lengths)
        for name in args.families.split(","):
            print(f"{families[name].name}: {len(texts)} documents of {', '.join(map(str, lengths))} tokens", flush=True)
            rows += run_family(families[name], Path(scratch), texts, dtypes=dtypes, rounds=args.rounds,
                               batch_size=args.batch_size)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
