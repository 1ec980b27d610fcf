"""`poolq bench jobpath`'s report as text: the machine and its load, the job path's rates per core count
with the scaling and the 16-core estimate beside the goal, host reads per step, the tokenizer alone,
where the time goes (profile), and the ``/v1/embeddings`` lane's latency."""
from __future__ import annotations

GOAL_DOCUMENTS_PER_S = 25_000  # short documents/s, one worker on a 16-core GPU host (issue J2)
GOAL_ADDED_MS = 5.0  # what poolq may add to one /v1/embeddings request, p50
HOST_CORES = 16


def render(report: dict) -> str:
    return "\n\n".join([_header(report), _scaling(report), _estimate(report), *_stack(report), _syncs(report),
                        _tokenizer(report), *(_profile(profile) for profile in report["profiles"]), _lane(report)])


def _stack(report: dict) -> list[str]:
    """The real stack's rates beside one in-process worker on the same 2 cores (or 1), if it ran."""
    if "stack" not in report:
        return []
    lines = ["On the real stack (poolq dev up: Redis, SeaweedFS, the API, a control worker and a stand-in compute worker, "
             "all on this machine's cores; a job's seconds are the server's, submission to end):",
             "| tokens/document | documents (small, large) | docs/s | tokens/s | whole-job docs/s | "
             "in process, one worker: docs/s |",
             "|---|---|---|---|---|---|"]
    cores = max(report["options"]["cores"])
    for row in report["stack"]:
        small, large = row["documents"]
        local = _rate(report, cores, 1, row["length"])
        lines.append(f"| {row['length']} | {small:,}, {large:,} | {_number(row['documents_per_s'])} | "
                     f"{_number(row['tokens_per_s'])} | {row['whole_job_documents_per_s']:,.0f} | "
                     f"{_number(local)} ({cores} core{'s' if cores > 1 else ''}) |")
    return ["\n".join(lines)]


def _header(report: dict) -> str:
    machine, options, engine = report["machine"], report["options"], report["engine"]
    load = " / ".join(f"{value:.1f}" for value in report["load_before"]), " / ".join(f"{v:.1f}" for v in report["load_after"])
    return "\n".join([
        f"Job path with a stand-in engine: {options['model']} (hidden {engine['hidden']}, {engine['dimensions']} dims), "
        f"{options['dtype']}; steps of <= {engine['max_num_batched_tokens']:,} tokens and {engine['max_num_seqs']} sequences; "
        f"shards sized at {report['shard_tokens_per_s']:,.0f} tokens/s (a GPU worker's default estimate)",
        f"Measured {report['date']} on {machine['cpu']} ({machine['usable_cores']} usable cores; flags: "
        f"{', '.join(machine['flags']) or '-'}); load average (1/5/15 min) {load[0]} before, {load[1]} after; "
        f"marginal rates, medians of {options['rounds']} round(s); TOKENIZERS_PARALLELISM={report['tokenizers_parallelism']}",
    ])


def _totals(run: dict) -> dict[int, dict]:
    """A run's rates per document length: documents/s and tokens/s summed over its workers, documents per
    CPU-second over all of them (each ran the same documents: a harmonic mean); None where one was not measurable."""
    by_length: dict[int, list[dict]] = {}
    for rows in run["per_worker"]:
        for row in rows:
            by_length.setdefault(row["length"], []).append(row)
    return {length: {"documents": rows[0]["documents"], "whole": sum(row["whole_job_documents_per_s"] for row in rows),
                     "documents_per_s": _sum([row["documents_per_s"] for row in rows]),
                     "tokens_per_s": _sum([row["tokens_per_s"] for row in rows]),
                     "documents_per_cpu_s": _harmonic([row["documents_per_cpu_s"] for row in rows])}
            for length, rows in by_length.items()}


def _sum(values: list[float | None]) -> float | None:
    return None if None in values else sum(value for value in values if value is not None)


def _harmonic(values: list[float | None]) -> float | None:
    return None if None in values else len(values) / sum(1 / value for value in values if value is not None)


def _number(value: float | None, divisor: float = 1) -> str:
    return "-" if value is None else f"{value / divisor:,.0f}"


def _scaling(report: dict) -> str:
    lines = ["| cores | workers | tokens/document | documents (small, large) | docs/s | tokens/s | docs/s per core | "
             "docs per CPU-second | whole-job docs/s |", "|---|---|---|---|---|---|---|---|---|"]
    for run in report["scaling"]:
        for length, total in _totals(run).items():
            small, large = total["documents"]
            lines.append(f"| {run['cores']} | {run['workers']} | {length} | {small:,}, {large:,} | "
                         f"{_number(total['documents_per_s'])} | {_number(total['tokens_per_s'])} | "
                         f"{_number(total['documents_per_s'], run['cores'])} | {_number(total['documents_per_cpu_s'])} | "
                         f"{total['whole']:,.0f} |")
    lines.append("docs/s, tokens/s: marginal ((large - small) / (large - small seconds)); docs per CPU-second: the same "
                 "from the processes' CPU time, steadier than wall time on a loaded machine; -: the large input was not "
                 "measurably slower than the small one (too few documents)")
    return "\n".join(lines)


def _rate(report: dict, cores: int, workers: int, length: int, key: str = "documents_per_s") -> float | None:
    for run in report["scaling"]:
        if (run["cores"], run["workers"]) == (cores, workers):
            return _totals(run).get(length, {}).get(key)
    return None


def _estimate(report: dict) -> str:
    """The 16-core estimate from the measured rates, beside the goal, for the shortest documents."""
    length = min(report["options"]["lengths"])
    one = _rate(report, 1, 1, length)
    if one is None:
        return "No measurable 1-core rate: nothing to extrapolate from (--cores 1,2, more --tokens-per-run)."
    cpu = _rate(report, 1, 1, length, "documents_per_cpu_s")
    lines = [f"Per core ({length}-token documents): {one:,.0f} docs/s = {one * length:,.0f} tokens/s wall; "
             f"{_number(cpu)} docs per CPU-second. Goal: {GOAL_DOCUMENTS_PER_S:,} docs/s for one worker on a "
             f"{HOST_CORES}-core GPU host."]
    lines += _compute_worker(report, length)
    worker, workers = _rate(report, 2, 1, length), _rate(report, 2, 2, length)  # None: not run, or not measurable
    if worker is not None:
        lines.append(f"One worker (planning, shards and finalizing in one process), 1 -> 2 cores: x{worker / one:.2f}.")
    if workers is not None:
        efficiency = workers / (2 * one)
        noisy = " Above 100%: the machine's load changed between the runs; not a scaling figure." if efficiency > 1 else ""
        lines.append(f"Two one-core workers at once: x{workers / one:.2f} (efficiency {efficiency:.0%}); {HOST_CORES} "
                     f"such workers feeding one GPU would reach ~{one * HOST_CORES * efficiency:,.0f} docs/s.{noisy}")
    return "\n".join(lines)


def _compute_worker(report: dict, length: int) -> list[str]:
    """A compute worker on the GPU host: its own thread (measured; no second core shares it) beside the
    tokenizer, whose batch calls spread over the Rust tokenizer's threads (measured on 1 and 2 cores,
    extrapolated to the cores the job's thread leaves)."""
    # The thread's figure where it had a core of its own beside the tokenizer's threads, as on the GPU host (on one
    # core they take turns, and the thread's CPU time grows with the switching)
    measured_on = 2 if _row(report, 2, 1, length, "compute_thread_ms_per_document") is not None else 1
    thread_ms = _row(report, measured_on, 1, length, "compute_thread_ms_per_document")
    tokenizing = {cores: (_row(report, cores, 1, length, "tokenizer") or {}).get("documents_per_s") for cores in (1, 2)}
    if thread_ms is None or tokenizing[1] is None:
        return []
    thread_cap = 1000 / thread_ms
    lines = [f"A compute worker's own thread (its shards: records read back, the engine's steps and pooling, rows, the "
             f"part and commit; that thread's CPU time, one worker on {measured_on} core(s)) spends {thread_ms:.4f} CPU-ms "
             f"per document: one worker tops out near {thread_cap:,.0f} docs/s ({thread_cap / GOAL_DOCUMENTS_PER_S:.0%} "
             "of the goal), whatever the cores."]
    one, two = tokenizing[1], tokenizing[2]
    if two is None:
        return lines
    tokenizer_cap = one * _amdahl(HOST_CORES - 1, two / one)
    ceiling = min(thread_cap, tokenizer_cap)
    limit = "its own thread" if thread_cap <= tokenizer_cap else "the tokenizer"
    lines.append(f"The tokenizer alone, in the engine's groups of 64: {one:,.0f} docs/s on 1 core, {two:,.0f} on 2 "
                 f"(x{two / one:.2f}: the Rust tokenizer spreads a batch over its threads); the {HOST_CORES - 1} cores "
                 f"beside the job's thread would tokenize ~{tokenizer_cap:,.0f} docs/s (Amdahl's law fitted to the 2-core "
                 f"gain). One compute worker on a {HOST_CORES}-core GPU host: ~{ceiling:,.0f} docs/s "
                 f"({ceiling / GOAL_DOCUMENTS_PER_S:.0%} of the goal), {limit} the limit.")
    return lines


def _amdahl(cores: int, two_core_gain: float) -> float:
    """The speedup on ``cores`` of work whose parallel share gives ``two_core_gain`` on two cores."""
    parallel = min(1.0, max(0.0, 2 * (1 - 1 / two_core_gain)))
    return 1 / ((1 - parallel) + parallel / cores)


def _row(report: dict, cores: int, workers: int, length: int, key: str):
    """``key`` of the first worker's row for ``length`` in the run of ``cores`` and ``workers``, or None."""
    for run in report["scaling"]:
        if (run["cores"], run["workers"]) == (cores, workers):
            return next((row.get(key) for row in run["per_worker"][0] if row["length"] == length), None)
    return None


def _syncs(report: dict) -> str:
    lines = ["Host reads per engine step (counted on the CPU: on a GPU each device read is a copy to the host and a wait; "
             "goal: 1 per step):"]
    for count in report["syncs"]:
        lines.append(f"  {count['length']}-token documents: {count['device_reads_per_step']:.1f} device reads per step "
                     f"({count['steps']} steps of {count['documents']:,} documents), "
                     f"{count['host_reads_per_step']:.1f} reads of host-side index tensors")
        lines += [f"    {site['site']}: {site['per_step']:.1f} per step{'' if site['device_read'] else ' (host-side)'}"
                  for site in count["sites"]]
    return "\n".join(lines)


def _tokenizer(report: dict) -> str:
    rates = ", ".join(f"{row['length']} tokens: {row['documents_per_s']:,.0f} docs/s, {row['documents_per_cpu_s']:,.0f} "
                      "per CPU-second" for row in report["tokenizer"])
    return f"The tokenizer alone (this process, groups of 64 as the engine's tokenizing thread calls it): {rates}"


def _profile(profile: dict) -> str:
    total, documents = profile["total_s"], profile["documents"]
    lines = [f"Where the time goes: {profile['length']}-token documents, one job of {documents:,} under cProfile "
             f"({total:.2f} s in the job's thread; the profiler slows Python code; stats in {profile['file']})",
             f"  {'stage':50} {'seconds':>8} {'share':>6} {'ms/doc':>7}"]
    lines += [f"  {stage['stage']:50} {stage['seconds']:>8.3f} {stage['seconds'] / total:>6.0%} "
              f"{1000 * stage['seconds'] / documents:>7.3f}" for stage in profile["stages"]]
    lines.append("  top functions by own time:")
    lines += [f"    {line}" for line in profile["top"].splitlines()]
    return "\n".join(lines)


def _lane(report: dict) -> str:
    lane = report["lane"]
    requests, alone, healthz = lane["requests"], lane["engine_alone"], lane["healthz"]
    verdict = "within" if lane["added_p50_ms"] <= GOAL_ADDED_MS else "over"
    return "\n".join([
        f"/v1/embeddings in process (TestClient -> route -> in-memory lane -> LaneServer thread -> stand-in engine), one "
        f"input of {min(report['options']['lengths'])} tokens per request, one request at a time, {requests['count']} requests:",
        f"  requests: {requests['per_s']:,.0f}/s, p50 {requests['p50_ms']:.2f} ms, p95 {requests['p95_ms']:.2f} ms",
        f"  engine alone (embed of the same text): p50 {alone['p50_ms']:.2f} ms, p95 {alone['p95_ms']:.2f} ms",
        f"  GET /healthz through the same client (the in-process transport's floor): p50 {healthz['p50_ms']:.2f} ms",
        f"  poolq adds (request p50 - engine p50): {lane['added_p50_ms']:.2f} ms, {verdict} the goal of {GOAL_ADDED_MS:g} ms; "
        f"{lane['added_beyond_transport_p50_ms']:.2f} ms beyond the transport's floor (route, lane, thread hand-offs)",
    ])
