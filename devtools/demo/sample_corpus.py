"""The sample corpus shipped with poolq: the demo's job and the benchmarks' texts.

Only the standard library here: the GPU check and the benchmarks read it on machines that have
torch and the engine's dependencies but none of the job stack (``infra/gpu/check.sh``)."""
from __future__ import annotations

import json
from importlib import resources


def load_sample_corpus() -> list[dict]:
    """The shipped State of the Union excerpts (real public-domain text; see SOURCES.md)."""
    text = resources.files(__package__).joinpath("sample_corpus.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
