"""One section of a job's input: the part of one object that one planning task reads."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from poolq.jobs.inputs.input_format import InputFormat


@dataclass(frozen=True)
class InputSection:
    """``[start, end)`` of one input object, as planning found it: bytes of a JSONL object, rows
    of a Parquet object (whole row groups)."""

    uri: str  # the object: shards read their ranges of it from here
    version: str  # ObjectInfo.version when the sections were listed
    name: str | None  # the object's name in error messages: its URI in a prefix input, else None
    start: int
    end: int
    whole: bool  # the section is the whole object (read as a stream: gzip allowed)
    format: str = InputFormat.JSONL.value  # sections listed before Parquet inputs were JSONL
    data_bytes: int | None = None  # Parquet: its row groups' uncompressed bytes (JSONL: end - start)

    @property
    def size_bytes(self) -> int:
        """What planning sizes its id partitions by: about the bytes of the section's records."""
        return self.data_bytes if self.data_bytes is not None else self.end - self.start

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> "InputSection":
        return cls(**raw)


def dump_sections(sections: list[InputSection]) -> bytes:
    return json.dumps([section.to_json() for section in sections]).encode("utf-8")


def load_sections(raw: bytes) -> list[InputSection]:
    return [InputSection.from_json(item) for item in json.loads(raw)]
