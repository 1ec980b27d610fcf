"""The corpus: short documents generated from the demo corpus' sentences, the storage they need, and their upload."""
from __future__ import annotations

import json
import math
import random
import re
import shutil
from pathlib import Path

AVERAGE_LINE_BYTES = 260  # a generated JSONL line: 1-2 sentences of the demo corpus and its id
BYTES_PER_VALUE = {"float32": 4, "float16": 2, "int8": 1, "binary": 0.125}


def _sentences() -> list[str]:
    """The demo corpus' sentences (20-400 characters), JSON-escaped once."""
    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    found = []
    for doc in load_sample_corpus():
        for sentence in re.split(r"(?<=[.!?])\s+", " ".join(doc["text"].split())):
            if 20 <= len(sentence) <= 400:
                found.append(json.dumps(sentence, ensure_ascii=False)[1:-1])
    return found


def generate_corpus(directory: Path, documents: int, *, per_file: int, seed: int = 0) -> list[Path]:
    """``documents`` short documents (1-2 consecutive sentences) in JSONL files of at most ``per_file``
    lines, written as they are made (a 1 MiB write buffer, never the corpus in memory)."""
    directory.mkdir(parents=True, exist_ok=True)
    sentences = _sentences()
    rng = random.Random(seed)
    paths, index = [], 0
    for file_number in range(max(1, math.ceil(documents / per_file))):
        path = directory / f"corpus-{file_number:04d}.jsonl"
        end = min(documents, index + per_file)
        with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
            while index < end:
                batch = []
                for i in range(index, min(end, index + 10_000)):
                    start = rng.randrange(len(sentences))
                    text = " ".join(sentences[start: start + rng.randint(1, 2)])
                    batch.append(f'{{"id": "doc-{i:09d}", "text": "{text}"}}\n')
                out.write("".join(batch))
                index += len(batch)
        paths.append(path)
    return paths


def _output_bytes(documents: int, dims: int, dtype: str) -> float:
    return documents * (dims * BYTES_PER_VALUE[dtype] + 40)  # vector + id, token count, Parquet overhead


def estimate_disk_bytes(documents: int, dims: int, dtype: str) -> int:
    """The corpus on disk and in SeaweedFS, plus the vectors, with a margin."""
    return int((2 * documents * AVERAGE_LINE_BYTES + _output_bytes(documents, dims, dtype)) * 1.3)


def require_disk(directory: Path, documents: int, dims: int, dtype: str) -> None:
    """Stop (SystemExit) before generating a corpus that ``directory``'s disk cannot hold."""
    needed = estimate_disk_bytes(documents, dims, dtype)
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise SystemExit(f"{documents:,} documents need about {needed / 1e9:.1f} GB on disk (corpus, its copy in "
                         f"SeaweedFS, {dtype} vectors); {directory} has {free / 1e9:.1f} GB free")


def estimate_seaweed_volumes(corpus_bytes: int, documents: int, dims: int, dtype: str, volume_mb: int = 64) -> int:
    needed_mb = (corpus_bytes + _output_bytes(documents, dims, dtype)) * 1.3 / (1 << 20)
    return max(32, math.ceil(needed_mb / volume_mb) + 16)


def upload_files(client, bucket: str, prefix: str, files: list[Path]) -> None:
    """Each file to ``prefix`` + its name, multipart from disk."""
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=16 << 20, max_concurrency=2)
    for path in files:
        client.upload_file(str(path), bucket, prefix + path.name, Config=config)
