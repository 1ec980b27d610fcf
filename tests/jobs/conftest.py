import pytest

from jobs.local_runner import local_context
from jobs.settings import Settings


@pytest.fixture
def local_ctx(tmp_path, minilm_engine):
    """An in-process job context on a temp directory, sharing the session's loaded engine."""
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, shard_max_chars=20_000))
    ctx.use_engine("all-MiniLM-L6-v2", minilm_engine)
    return ctx
