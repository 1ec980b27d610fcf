"""Record ids: what the id of a document (inline, or read from an input) may be."""
from __future__ import annotations

import re

MAX_ID_LENGTH = 512
# No control character (C0, DEL, C1) in an id: ids end up in Parquet, error files and log lines,
# where a newline or escape sequence would forge or garble a row. Inline ids match it as a pattern.
ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
