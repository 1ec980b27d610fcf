"""Cutting a section's kept records into shards of bounded estimated work."""
from __future__ import annotations

from dataclasses import dataclass

from poolq.jobs.inputs.input_format import InputFormat
from poolq.jobs.inputs.input_section import InputSection
from poolq.jobs.inputs.record_limits import input_limits
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.inputs.shard_input import ShardInput
from poolq.jobs.job_handle import JobHandle
from poolq.storage import JsonlObject

# Characters per token, to estimate a shard's work before anything is tokenized (English text
# with WordPiece/BPE vocabularies runs at 4-5; erring low sizes shards a little small, not large).
CHARS_PER_TOKEN = 4.0
SPECIAL_TOKENS_PER_DOCUMENT = 2


def estimated_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1 + SPECIAL_TOKENS_PER_DOCUMENT


@dataclass
class _ShardBuffer:
    """The shard being cut: its records' byte runs, and its estimated work."""

    max_documents: int
    max_chars: int
    max_tokens: int
    shard: ShardInput
    chars: int = 0
    tokens: int = 0

    def would_overflow(self, record: InputRecord) -> bool:
        too_many = self.shard.documents >= self.max_documents
        too_long = self.chars + len(record.text) > self.max_chars
        too_much_work = self.tokens + estimated_tokens(record.text) > self.max_tokens
        return bool(self.shard.documents) and (too_many or too_long or too_much_work)

    def add(self, record: InputRecord, item: JsonlObject, continues_run: bool) -> None:
        self.shard.add(record, item, continues_run)
        self.chars += len(record.text)
        self.tokens += estimated_tokens(record.text)


class ShardCutter:
    """Cuts one section's records into shards and writes each shard's descriptor as it fills."""

    def __init__(self, job: JobHandle, index: int, section: InputSection) -> None:
        self.ctx = job.ctx
        self.layout = job.layout
        self.index, self.section = index, section
        self.num_shards = 0
        self.characters = 0  # of every record cut into this section's shards
        self.skipped = False
        self.last_query_id: str | None = None
        self.buffer = self._new_buffer()

    def _new_buffer(self) -> _ShardBuffer:
        settings = self.ctx.settings
        shard = ShardInput(uri=self.section.uri, version=self.section.version, source=self.section.name,
                           format=InputFormat(self.section.format),  # the section stores the format's name
                           limits=input_limits(settings))  # what its records were read within, to read them again
        sharding = settings.sharding
        return _ShardBuffer(sharding.shard_max_documents, sharding.shard_max_chars, settings.shard_token_budget, shard)

    def add(self, record: InputRecord, item: JsonlObject) -> None:
        # A query's consecutive pairs stay in one shard, which ranks them: its size bends to them.
        continues_query = record.query_id is not None and record.query_id == self.last_query_id
        if self.buffer.would_overflow(record) and not continues_query:
            self._flush()
        self.buffer.add(record, item, continues_run=not self.skipped)
        self.characters += record.characters
        self.skipped = False
        self.last_query_id = record.query_id

    def skip(self) -> None:
        """A line the shards leave out (an error, a duplicate, a carried document): it ends a run."""
        self.skipped = True

    def _flush(self) -> None:
        self.ctx.store.put(self.layout.shard_input(self.index, self.num_shards), self.buffer.shard.to_bytes())
        self.num_shards += 1
        self.buffer = self._new_buffer()

    def close(self) -> int:
        """Write the last shard; returns how many shards the section has."""
        if self.buffer.shard.documents:
            self._flush()
        return self.num_shards
