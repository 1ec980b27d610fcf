"""Fixtures of the observability tests."""
import io
import json
import logging

import pytest

from poolq.jobs.observability.log_format import JsonFormatter


@pytest.fixture
def json_lines():
    """A JSON handler on the root logger; returns a function giving the lines logged so far, parsed."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(level)
