"""Tab-separated lines spilled to one local file per partition, appended in batches: how planning's
decide steps (ids, duplicates, reuse owners) hold a corpus on disk with memory bounded by a batch."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterator

# Bytes of pending spill lines held before they are appended to their files.
FLUSH_BYTES = 1 << 20


class SpillFiles:
    """Lines appended to ``{prefix}-{partition:05d}.tsv`` in ``directory``, written in batches."""

    def __init__(self, directory: Path, prefix: str, partitions: int) -> None:
        self.directory, self.prefix, self.partitions = directory, prefix, partitions
        self._pending: dict[int, list[str]] = defaultdict(list)
        self._pending_bytes = 0
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, partition: int) -> Path:
        return self.directory / f"{self.prefix}-{partition:05d}.tsv"

    def add(self, partition: int, line: str) -> None:
        self._pending[partition].append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        for partition, lines in self._pending.items():
            with self.path(partition).open("a", encoding="utf-8") as handle:
                handle.writelines(lines)
        self._pending.clear()
        self._pending_bytes = 0

    def discard(self) -> None:
        """Forget every line, pending or written: the files are as if never written."""
        self._pending.clear()
        self._pending_bytes = 0
        for partition in range(self.partitions):
            self.path(partition).unlink(missing_ok=True)

    def read(self, partition: int) -> Iterator[list[str]]:
        """The partition's lines, split at tabs (nothing for a partition never written)."""
        path = self.path(partition)
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    yield line.rstrip("\n").split("\t")
