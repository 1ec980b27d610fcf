"""One run: a corpus size on a fresh stack, from generating the corpus to stopping everything it started."""
from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from scalebench.corpus import estimate_seaweed_volumes, generate_corpus, require_disk, upload_files
from scalebench.job import DEV_TENANT, read_outcome, submit_and_wait
from scalebench.logs import scan_logs, stack_logs
from scalebench.result import RunResult
from scalebench.s3_requests import FLUSH_INTERVAL_S, S3RequestCounter, read_s3_counts
from scalebench.sampling import Sampler, fill_samples
from scalebench.stack import bench_stack_class


def run_once(documents: int, args: argparse.Namespace, root: Path, log=print) -> RunResult:
    """One corpus size on a fresh stack; the stack is stopped afterwards unless ``args.keep``."""
    run = _Run(documents, args, root, log)
    files = run.generate()
    run.make_stack()
    try:
        run.measure(files)
    except Exception as exc:
        run.result.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run.finish()
    return run.result


class _Run:
    """What one run's steps share: its directory, its result, its stack and what it started."""

    def __init__(self, documents: int, args: argparse.Namespace, root: Path, log) -> None:
        from poolq.jobs.settings import Settings

        self.documents, self.args, self.log = documents, args, log
        self.result = RunResult(documents=documents, workers=args.workers)
        self.run_dir = root / f"n{documents}-w{args.workers}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.result.state_dir = str(self.run_dir)
        self.counts_dir = self.run_dir / "s3-counts"
        self.counts_dir.mkdir(parents=True)
        self.output_prefix = args.settings.get("output_prefix", Settings.flat_fields()["output_prefix"].default)
        self.corpus_bytes = 0
        self.stack = None
        self.extra: list[int] = []  # the workers started beside the stack's own
        self.sampler: Sampler | None = None

    def generate(self) -> list[Path]:
        documents, args, result = self.documents, self.args, self.result
        require_disk(self.run_dir, documents, args.dims, args.output_dtype)
        started = time.perf_counter()
        files = generate_corpus(self.run_dir / "corpus", documents, per_file=args.docs_per_file, seed=args.seed)
        result.generate_s = time.perf_counter() - started
        self.corpus_bytes = sum(path.stat().st_size for path in files)
        result.corpus_mb = self.corpus_bytes / 1e6
        self.log(f"[{documents}] corpus: {len(files)} file(s), {result.corpus_mb:.1f} MB in {result.generate_s:.1f}s; "
                 f"stack in {self.run_dir / 'stack'} (SeaweedFS up to {self.volumes()} x 64 MB volumes)")
        return files

    def volumes(self) -> int:
        args = self.args
        return args.seaweed_volumes or estimate_seaweed_volumes(self.corpus_bytes, self.documents, args.dims,
                                                                args.output_dtype)

    def make_stack(self) -> None:
        """The stack, not started yet, with SeaweedFS sized for the corpus."""
        from poolq.devtools.devstack.ports import ANY_PORT
        from poolq.devtools.devstack.stack import StackPorts

        args = self.args
        threads = str(args.threads_per_worker)
        self.stack = bench_stack_class()(
            self.run_dir / "stack", StackPorts(redis=ANY_PORT, s3=ANY_PORT, api=ANY_PORT),
            env={f"POOLQ_{name.upper()}": value for name, value in args.settings.items()},
            worker_env={"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},
            counts_dir=self.counts_dir, seaweed_volumes=self.volumes(), start_timeout_s=args.start_timeout)

    def measure(self, files: list[Path]) -> None:
        import redis

        from poolq.storage import S3Config

        state = self.start()
        r = redis.Redis.from_url(state.redis_url)
        roots = {"api": [state.pids["api"]], "worker": [state.pids["worker"], *self.extra], "beat": [state.pids["beat"]],
                 "redis": [state.pids["redis"]], "weed": [state.pids["seaweed"]]}
        self.result.pids = roots
        self.sampler = Sampler(roots, r).start()
        s3_config = S3Config(state.s3_endpoint, state.access_key_id, state.secret_access_key)
        uri, bench_counter = self.upload(state, s3_config, files)
        final = submit_and_wait(state, r, uri, self.args, self.result, self.log)
        read_outcome(state, s3_config, self.output_prefix, r, final, self.result)
        self.collect(r, bench_counter)

    def start(self):
        """The stack and the extra workers, each ready; their pids go into ``extra`` before any wait."""
        documents, stack = self.documents, self.stack
        started = time.perf_counter()
        state, _ = stack.up(log=lambda line: self.log(f"[{documents}]   {line}"))
        launched = stack.launch_workers(state, self.args.workers)
        self.extra.extend(pid for pid, _ in launched)
        (self.run_dir / "extra-workers.json").write_text(json.dumps(self.extra))
        stack.wait_workers(launched)
        self.result.stack_start_s = time.perf_counter() - started
        self.log(f"[{documents}] stack up in {self.result.stack_start_s:.1f}s: {self.args.workers} worker(s), "
                 f"API {state.api_url}")
        return state

    def upload(self, state, s3_config, files: list[Path]) -> tuple[str, S3RequestCounter]:
        """``files`` under the dev tenant's uploads prefix, counted as ``bench``: (the job's input URI, the counter)."""
        from poolq.jobs.ledger.layout import ServiceLayout
        from poolq.storage import make_s3_client

        uploads = ServiceLayout(self.output_prefix).uploads_prefix(DEV_TENANT) + f"scale-{self.run_dir.name}/"
        bench_counter = S3RequestCounter()
        upload_client = make_s3_client(s3_config)
        bench_counter.attach(upload_client)
        started = time.perf_counter()
        upload_files(upload_client, state.bucket, uploads, files)
        self.result.upload_s = time.perf_counter() - started
        uri = f"s3://{state.bucket}/{uploads}" + (files[0].name if len(files) == 1 else "")
        self.log(f"[{self.documents}] uploaded in {self.result.upload_s:.1f}s -> {uri}")
        return uri, bench_counter

    def collect(self, r, bench_counter: S3RequestCounter) -> None:
        """After the job: the sampler's peaks, every process's S3 counts and the logs' findings."""
        result = self.result
        time.sleep(3 * FLUSH_INTERVAL_S)  # the processes' last counts reach their files
        self.sampler.stop()
        fill_samples(result, self.sampler, r)
        counts = read_s3_counts(self.counts_dir)
        result.s3 = {kind: {name: dict(c) for name, c in by_name.items()} for kind, by_name in counts.items()}
        result.s3["bench"] = bench_counter.snapshot()
        result.log_findings = scan_logs(stack_logs(self.run_dir / "stack"))

    def finish(self) -> None:
        """Write ``result.json``; stop the stack and the extra workers and remove the bulky data, unless ``--keep``."""
        from poolq.devtools.devstack.process import stop_pid

        if self.sampler is not None:
            self.sampler.stop()
        (self.run_dir / "result.json").write_text(json.dumps(asdict(self.result), indent=2, default=str))
        if self.args.keep:
            self.log(f"[{self.documents}] left running: poolq dev down --dir {self.run_dir / 'stack'}; "
                     f"extra workers (pids): {self.extra}")
            return
        for pid in self.extra:
            stop_pid(pid, expect_in_cmdline="worker", timeout=30)
        self.stack.down()
        for name in ("corpus", "stack/seaweed", "stack/redis", "s3-counts"):
            shutil.rmtree(self.run_dir / name, ignore_errors=True)
