"""Sampling while a job runs: process-tree RSS and Redis (memory, keys, queue lengths, unacked) peaks, polled in a thread."""
from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from pathlib import Path

from scalebench.result import RunResult

SAMPLE_INTERVAL_S = 0.5


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found


def tree_rss_bytes(pid: int, depth: int = 6) -> int:
    """VmRSS of ``pid`` and its descendants (``depth`` levels), in bytes; 0 if it is gone."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, frontier, seen = 0, [pid], set()
    for _ in range(depth):
        following = []
        for p in frontier:
            if p in seen:
                continue
            seen.add(p)
            try:
                total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * page
            except (OSError, ValueError, IndexError):
                continue
            following += _children(p)
        frontier = following
        if not frontier:
            break
    return total


def _key_pattern(key: str) -> str:
    key = re.sub(r"[0-9a-f]{32}", "<job>", key)
    key = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", key)
    return re.sub(r"\d+", "<n>", key)


class Sampler:
    """Polls process trees and Redis every ``SAMPLE_INTERVAL_S`` in a thread, keeping peaks."""

    def __init__(self, roots: dict[str, list[int]], redis_client) -> None:
        from kombu.transport.redis import PRIORITY_STEPS, Channel

        from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE

        self.roots, self.redis = roots, redis_client
        self.queue_lists = {queue: [f"{queue}{Channel.sep}{step}" if step else queue for step in PRIORITY_STEPS]
                            for queue in (CONTROL_QUEUE, GPU_QUEUE)}
        self.peak_rss: dict[str, int] = {kind: 0 for kind in roots}
        self.peak = {"keys": 0, "used_memory": 0, "unacked": 0, **{f"queue:{q}": 0 for q in self.queue_lists}}
        self.keys_at_peak: dict[str, int] = {}
        self.largest_at_peak: list[dict] = []
        self.samples = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scale-sampler", daemon=True)
        self._last_scan = 0.0
        self._scanned_at_keys = -1

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a missed sample (Redis busy, a process exiting) is not fatal
                self.errors += 1
            self._stop.wait(SAMPLE_INTERVAL_S)

    def sample(self) -> None:
        self.samples += 1
        for kind, pids in self.roots.items():
            self.peak_rss[kind] = max(self.peak_rss[kind], max((tree_rss_bytes(p) for p in pids), default=0))
        keys = self._sample_redis()
        if keys > self._scanned_at_keys and time.monotonic() - self._last_scan > 5:
            self.keys_at_peak = self.key_patterns()
            self.largest_at_peak = self.largest_keys()
            self._scanned_at_keys, self._last_scan = keys, time.monotonic()

    def _sample_redis(self) -> int:
        """One pipeline of DBSIZE, INFO memory, HLEN unacked and the queue lists' LLENs; peaks kept. Returns DBSIZE."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.dbsize()
        pipe.info("memory")
        pipe.hlen("unacked")
        for lists in self.queue_lists.values():
            for name in lists:
                pipe.llen(name)
        answers = iter(pipe.execute())
        keys, memory, unacked = next(answers), next(answers), next(answers)
        self.peak["keys"] = max(self.peak["keys"], keys)
        self.peak["used_memory"] = max(self.peak["used_memory"], int(memory.get("used_memory", 0)))
        self.peak["unacked"] = max(self.peak["unacked"], unacked)
        for queue, lists in self.queue_lists.items():
            self.peak[f"queue:{queue}"] = max(self.peak[f"queue:{queue}"], sum(next(answers) for _ in lists))
        return keys

    def largest_keys(self, top: int = 5, limit: int = 20_000) -> list[dict]:
        """The ``top`` keys by MEMORY USAGE (of at most ``limit`` scanned), with their type and length."""
        keys = []
        for count, key in enumerate(self.redis.scan_iter(count=1000)):
            if count >= limit:
                break
            keys.append(key)
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.memory_usage(key)
        sizes = sorted(zip(pipe.execute(), keys), key=lambda pair: -(pair[0] or 0))[:top]
        lengths = {"set": "scard", "hash": "hlen", "list": "llen", "zset": "zcard", "string": "strlen"}
        found = []
        for size, key in sizes:
            kind = self.redis.type(key).decode()
            length = getattr(self.redis, lengths[kind])(key) if kind in lengths else None
            found.append({"key": _key_pattern(key.decode(errors="replace")), "type": kind, "length": length,
                          "bytes": size, "ttl_s": self.redis.ttl(key)})
        return found

    def key_patterns(self, limit: int = 200_000) -> dict[str, int]:
        patterns: Counter = Counter()
        for count, key in enumerate(self.redis.scan_iter(count=1000)):
            if count >= limit:
                patterns["(scan stopped)"] += 1
                break
            patterns[_key_pattern(key.decode(errors="replace"))] += 1
        return dict(patterns.most_common(25))


def fill_samples(result: RunResult, sampler: Sampler, r) -> None:
    """The stopped ``sampler``'s peaks into ``result``, with Redis' keys and largest keys after the job."""
    result.keys_after = sampler.key_patterns()
    result.largest_keys_after = sampler.largest_keys()
    result.peak_rss_mb = {kind: value / (1 << 20) for kind, value in sampler.peak_rss.items()}
    result.redis_used_memory_peak_mb = int(r.info("memory")["used_memory_peak"]) / (1 << 20)
    result.redis_sampled_peak_mb = sampler.peak["used_memory"] / (1 << 20)
    result.peak_keys = sampler.peak["keys"]
    result.peak_unacked = sampler.peak["unacked"]
    result.peak_queue = {name.split(":", 1)[1]: value for name, value in sampler.peak.items() if name.startswith("queue:")}
    result.keys_at_peak = sampler.keys_at_peak
    result.largest_keys_at_peak = sampler.largest_at_peak
