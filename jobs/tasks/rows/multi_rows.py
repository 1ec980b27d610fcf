"""Several tasks' columns in one row set (one forward pass, e.g. BGE-M3's dense + sparse +
ColBERT outputs): the common columns once, then each task's value columns in task order."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from poolq.storage.row_columns import RowColumns


@dataclass
class MultiRows(RowColumns):
    """``groups``: one row buffer per task; their value columns are written, their common ones
    (which they also keep) are not."""

    groups: list[RowColumns] = field(default_factory=list)

    def value_fields(self) -> list[pa.Field]:
        return [value_field for group in self.groups for value_field in group.value_fields()]

    def value_arrays(self) -> list[pa.Array]:
        return [array for group in self.groups for array in group.value_arrays()]
