"""The report: the main table (COLUMNS), the S3 requests by operation and process kind, and each run's details."""
from __future__ import annotations

import argparse
import sys
from collections import Counter

from poolq.devtools.bench.machine import format_machine, machine_facts
from scalebench.result import RunResult

PUT_OPERATIONS = ("PutObject", "UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload", "CopyObject")
S3_COLUMNS = {  # table column -> operations it sums
    "S3 PUT": PUT_OPERATIONS,
    "S3 GET": ("GetObject",),
    "S3 HEAD": ("HeadObject",),
    "S3 LIST": ("ListObjectsV2", "ListObjects", "ListMultipartUploads"),
    "S3 DELETE": ("DeleteObject", "DeleteObjects", "AbortMultipartUpload"),
}
COLUMNS = ("documents", "workers", "shards", "status", "plan s", "e2e s", "docs/s", "shard-s", "shard share",
           "API MB", "worker MB", "beat MB", "redis MB", "weed MB", "redis peak MB", "peak keys", "peak gpu q",
           "peak control q", *S3_COLUMNS, "S3 other", "S3 total")
PROCESS_KINDS = ("api", "worker", "beat", "bench")


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table_row(result: RunResult) -> dict[str, str]:
    rss = result.peak_rss_mb
    known = {op for ops in S3_COLUMNS.values() for op in ops}
    other = sum(n for counts in result.s3.values() for op, n in counts.get("requests", {}).items() if op not in known)
    row = {
        "documents": _fmt(result.documents), "workers": _fmt(result.workers), "shards": _fmt(result.shards),
        "status": result.status, "plan s": _fmt(result.plan_s), "e2e s": _fmt(result.e2e_s),
        "docs/s": _fmt(result.docs_per_s, 0), "shard-s": _fmt(result.shard_seconds),
        "shard share": f"{result.shard_share:.0%}" if result.shard_share is not None else "-",
        "API MB": _fmt(rss.get("api"), 0), "worker MB": _fmt(rss.get("worker"), 0), "beat MB": _fmt(rss.get("beat"), 0),
        "redis MB": _fmt(rss.get("redis"), 0), "weed MB": _fmt(rss.get("weed"), 0),
        "redis peak MB": _fmt(result.redis_used_memory_peak_mb), "peak keys": _fmt(result.peak_keys),
        "peak gpu q": _fmt(result.peak_queue.get("gpu")), "peak control q": _fmt(result.peak_queue.get("control")),
    }
    for column, operations in S3_COLUMNS.items():
        row[column] = _fmt(result.s3_total(operations))
    row["S3 other"] = _fmt(other)
    row["S3 total"] = _fmt(result.s3_total())
    return row


def format_table(results: list[RunResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for result in results:
        row = table_row(result)
        lines.append("| " + " | ".join(row[column] for column in COLUMNS) + " |")
    return "\n".join(lines)


def _s3_row(result: RunResult, op: str) -> str:
    per_kind = [result.s3.get(kind, {}).get("requests", {}).get(op, 0) for kind in PROCESS_KINDS]
    errors = Counter()
    for counts in result.s3.values():
        errors.update({k.split(" ", 1)[1]: n for k, n in counts.get("errors", {}).items() if k.split(" ", 1)[0] == op})
    error_text = ", ".join(f"{status}: {n:,}" for status, n in sorted(errors.items())) or "-"
    return (f"| {result.documents:,} | {op} | " + " | ".join(f"{n:,}" for n in per_kind)
            + f" | {sum(per_kind):,} | {error_text} |")


def format_s3_table(results: list[RunResult]) -> str:
    lines = ["| documents | operation | " + " | ".join(PROCESS_KINDS) + " | total | errors |",
             "|" + "---|" * (len(PROCESS_KINDS) + 4)]
    for result in results:
        operations = sorted({op for counts in result.s3.values() for op in counts.get("requests", {})})
        lines += [_s3_row(result, op) for op in operations]
    return "\n".join(lines)


def _describe_key(key: dict) -> str:
    ttl = key.get("ttl_s")
    expiry = "ttl unknown" if ttl is None else "no expiry" if ttl < 0 else f"expires in {ttl:,} s"
    return f"{key['key']} ({key['type']}, {_fmt(key['length'])} long, {_fmt(key['bytes'])} B, {expiry})"


def _details(result: RunResult) -> list[str]:
    out = [f"documents {result.documents:,}: job {result.job_id} {result.status}; completed {result.completed:,}, "
           f"failed {result.failed:,}, tokens {result.tokens:,}; corpus {result.corpus_mb:.1f} MB generated in "
           f"{result.generate_s:.1f}s, stack start {result.stack_start_s:.1f}s, upload {result.upload_s:.1f}s; "
           f"queued {_fmt(result.queued_s, 2)}s, plan {_fmt(result.plan_s, 2)}s (plan.json LastModified - "
           f"created_at: {_fmt(result.plan_ledger_s, 0)}s, whole seconds); "
           f"shards committed per /metrics {_fmt(result.shards_committed_metric)}; "
           f"peak unacked {result.peak_unacked:,}; sampled Redis peak {_fmt(result.redis_sampled_peak_mb)} MB"]
    objects = Counter()
    for counts in result.s3.values():
        objects.update(counts.get("objects", {}))
    shards = max(1, result.shards or 1)
    out.append("  S3 requests by object (all processes; per shard): " + ", ".join(
        f"{name} {n:,} ({n / shards:.1f})" for name, n in objects.most_common(20)))
    out.append(f"  Redis keys at the peak: {result.keys_at_peak}")
    out.append(f"  Redis keys after the job: {result.keys_after}")
    for when, largest in (("at the peak", result.largest_keys_at_peak), ("after the job", result.largest_keys_after)):
        out.append(f"  largest Redis keys {when}: " + ", ".join(_describe_key(k) for k in largest))
    for name, finding in result.log_findings.items():
        out.append(f"  log {name}: {finding['errors']} error(s), {finding['warnings']} warning(s), "
                   f"{finding['tracebacks']} traceback(s); first errors: {finding['first']}; "
                   f"first warnings: {finding['first_warnings']}")
    if result.error:
        out.append(f"  error: {result.error}")
    out.append(f"  logs and result.json: {result.state_dir}")
    return out


def format_details(results: list[RunResult]) -> str:
    return "\n".join(line for result in results for line in _details(result))


def print_report(results: list[RunResult], args: argparse.Namespace) -> None:
    """The machine, the main table, the S3 table and the details, on stdout."""
    print(format_machine(machine_facts(), args))
    print()
    print(format_table(results))
    print()
    print("S3 requests by operation and process kind (each HTTP attempt; errors: HTTP status: count):")
    print(format_s3_table(results))
    print()
    print(format_details(results))
    sys.stdout.flush()
