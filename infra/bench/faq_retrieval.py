"""Retrieval quality per compute dtype: nDCG@10 on the Python FAQ (Debian's ``python3.11-doc``).

The set: every FAQ question (a heading ending in "?") is a query; its answer (the text up to the
next heading) is cut into passages of about 80 words, which are its relevant documents; the
corpus is every answer's passages. Each dtype embeds queries and corpus, ranks by cosine and
scores nDCG@10 (binary relevance); the report gives each dtype's change from float32.

    python3 infra/bench/faq_retrieval.py [--dtypes float32,bfloat16,int8] [--faq-dir DIR]
"""
from __future__ import annotations

import argparse
import html
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FAQ_DIR = Path("/usr/share/doc/python3.11/html/faq")  # apt install python3.11-doc
PASSAGE_WORDS = 80
_HEADING = re.compile(r"<h([23])>(.*?)</h\1>", re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class RetrievalSet:
    queries: list[str]
    passages: list[str]
    relevant: list[set[int]]  # per query: indices of its answer's passages


def _text(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).replace("¶", " ").split())


def load_faq(faq_dir: Path = FAQ_DIR) -> RetrievalSet:
    queries, passages, relevant = [], [], []
    for page in sorted(faq_dir.glob("*.html")):
        if page.name == "index.html":
            continue
        source = page.read_text(encoding="utf-8")
        headings = list(_HEADING.finditer(source))
        for heading, following in zip(headings, [*headings[1:], None]):
            question = _text(heading.group(2))
            answer = _text(source[heading.end(): following.start() if following else len(source)]).split()
            if not question.endswith("?") or len(answer) < 5:
                continue
            first = len(passages)
            passages += [" ".join(answer[i:i + PASSAGE_WORDS]) for i in range(0, len(answer), PASSAGE_WORDS)]
            queries.append(question)
            relevant.append(set(range(first, len(passages))))
    if not queries:
        raise FileNotFoundError(f"no FAQ questions under {faq_dir}: apt install python3.11-doc")
    return RetrievalSet(queries, passages, relevant)


def ndcg_at_10(query_vectors: np.ndarray, passage_vectors: np.ndarray, relevant: list[set[int]]) -> float:
    scores = query_vectors @ passage_vectors.T  # [queries, passages], vectors are unit length
    total = 0.0
    for row, wanted in zip(scores, relevant):
        top = np.argsort(-row, kind="stable")[:10]
        dcg = sum(1 / math.log2(rank + 2) for rank, index in enumerate(top) if index in wanted)
        ideal = sum(1 / math.log2(rank + 2) for rank in range(min(10, len(wanted))))
        total += dcg / ideal
    return total / len(relevant)


def run(model: str, dtypes: list[str], faq_dir: Path) -> dict:
    import torch

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    torch.set_num_threads(max(1, torch.get_num_threads()))
    data = load_faq(faq_dir)
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
    results = {}
    for dtype in dtypes:
        engine = PoolingEngine.from_pretrained(model, dtype=dtype)
        results[dtype] = ndcg_at_10(engine.embed(data.queries, policy=policy), engine.embed(data.passages, policy=policy),
                                    data.relevant)
    baseline = results.get("float32")
    return {"model": model, "queries": len(data.queries), "passages": len(data.passages),
            "ndcg_at_10": results, "change_from_float32": {d: v - baseline for d, v in results.items()} if baseline else {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--dtypes", default="float32,bfloat16,int8")
    parser.add_argument("--faq-dir", type=Path, default=FAQ_DIR)
    args = parser.parse_args()
    print(json.dumps(run(args.model, args.dtypes.split(","), args.faq_dir), indent=2))


if __name__ == "__main__":
    main()
