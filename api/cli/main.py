"""The ``poolq`` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from poolq.api.cli.lazy_group import LazyGroup
from poolq.api.cli.local_stack import BROKER_SETTINGS, STACK_ENV, STACK_META, cli_settings

_COMMANDS = "poolq.api.cli.commands"  # each command group in its own module, imported when it runs
# Each command's module is imported when the command runs (lazy_group.py says why).
LAZY_COMMANDS = {
    "dev": f"{_COMMANDS}.dev_commands:dev", "keys": f"{_COMMANDS}.key_commands:keys",
    "cache": f"{_COMMANDS}.cache_commands:cache",
    **{name: f"{_COMMANDS}.job_commands:{name}" for name in ("submit", "status", "wait", "results", "cancel", "jobs")},
    "schedules": f"{_COMMANDS}.schedule_commands:schedules", "logs": f"{_COMMANDS}.log_command:logs",
    "embed": f"{_COMMANDS}.embed_command:embed", "sink": f"{_COMMANDS}.sink_commands:sink",
    "webhooks": f"{_COMMANDS}.webhook_commands:webhooks", "models": f"{_COMMANDS}.model_commands:models",
}


@click.group(cls=LazyGroup, lazy_commands=LAZY_COMMANDS)
@click.option("--stack", default=None, envvar=STACK_ENV, type=click.Path(file_okay=False, path_type=Path),
              help=f"the local stack to use: its state directory, or the folder holding its .poolq (env {STACK_ENV}; "
                   "default: ./.poolq, else the one `poolq dev up` started, anywhere)")
@click.pass_context
def main(context: click.Context, stack: Path | None) -> None:
    """poolq: async jobs for pooling models (embeddings of long documents, as Parquet)."""
    if stack is not None:
        context.meta[STACK_META] = str(stack)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int, help="0: any free port (uvicorn logs which)")
def serve(host: str, port: int) -> None:
    """Run the HTTP API (settings from POOLQ_* environment variables); logs per POOLQ_LOG_FORMAT."""
    import uvicorn

    from poolq.jobs import KeySigner, Settings, SigningSecretMissing, configure_logging

    settings = Settings()
    configure_logging(settings.observability.log_format, "INFO")
    secret = settings.access.key_signing_secret
    try:  # refused here in one line, not as a traceback out of the app factory
        KeySigner.from_secret(secret.get_secret_value() if secret else None)
    except SigningSecretMissing as missing:
        raise click.ClickException(str(missing)) from None
    # log_config=None: uvicorn keeps the handlers above. Its access log holds the request line
    # (client, method, path, status), never headers: API keys do not reach the log.
    # proxy_headers=False: uvicorn would believe X-Forwarded-For from 127.0.0.1 (any local process,
    # a sidecar); the app reads it only from POOLQ_TRUSTED_PROXIES (api/server/guards/client_address.py).
    uvicorn.run("poolq.api.server.app:create_app", factory=True, host=host, port=port, log_level="info", log_config=None,
                proxy_headers=False)


@main.command()
@click.option("--concurrency", default=1, show_default=True, type=int, help="pool processes of the compute worker")
@click.option("--hostname", default=None, help="Celery node name")
@click.option("--queues", default=None, help="comma-separated queues (control, webhooks, gpu): one plain worker on "
              "them (one per GPU with --gpus; webhooks alone: a pool of --concurrency threads), instead of a control "
              "worker, a webhook worker and a compute worker")
@click.option("--gpus", default=None, help="comma-separated GPUs, one compute worker each (its CUDA_VISIBLE_DEVICES, "
              "concurrency 1): indices (0,1; counted within an inherited CUDA_VISIBLE_DEVICES), GPU UUIDs (GPU-…) or "
              "MIG ids (MIG-…)")
@click.option("--max-tasks-per-child", default=None, type=int, help="replace a pool child after this many tasks")
@click.option("--loglevel", default="INFO", show_default=True)
def worker(concurrency: int, hostname: str | None, queues: str | None, gpus: str | None, max_tasks_per_child: int | None,
           loglevel: str) -> None:
    """Run poolq's workers (settings from POOLQ_* env): a control worker (planning, finalizing,
    the reconciler; it never loads a model), a webhook worker (deliveries) and a compute worker
    (shards and the interactive lane)."""
    # Only the names each branch needs: the supervisor of a worker set imports no Celery worker.
    from poolq.jobs import GPU_QUEUE, Settings
    from poolq.storage import StorageError
    from poolq.worker import WorkerOptions, run_worker_set

    settings = Settings()
    queue_names = (GPU_QUEUE,) if queues is None else tuple(name.strip() for name in queues.split(",") if name.strip())
    try:
        if gpus is None and queues is not None:  # one plain worker
            from poolq.worker import run_worker

            sys.exit(run_worker(settings, WorkerOptions(concurrency, loglevel, hostname, queue_names, max_tasks_per_child)))
        gpu_ids = None
        if gpus is not None:
            gpu_ids = _checked_gpus(gpus)
            max_tasks_per_child = max_tasks_per_child or 100
        options = WorkerOptions(concurrency, loglevel, hostname, queue_names, max_tasks_per_child)
        # --queues with --gpus: those queues' workers, one per GPU, and no control worker beside them
        sys.exit(run_worker_set(settings, options, gpu_ids, control=queues is None))
    except StorageError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(3)


def _checked_gpus(gpus: str) -> list[str]:
    """``--gpus``'s entries, each checked now (before the store is), against this process's CUDA_VISIBLE_DEVICES too."""
    import os

    from poolq.worker.fleet.gpu_selection import GpuSelectionError, gpu_slots, split_gpus

    entries = split_gpus(gpus)
    try:
        gpu_slots(entries, os.environ.get("CUDA_VISIBLE_DEVICES"))
    except GpuSelectionError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpus") from exc
    return entries


@main.command()
@click.option("--loglevel", default="INFO", show_default=True)
def beat(loglevel: str) -> None:
    """Run the scheduler (celery beat with RedBeat): the reconciler and the reindex schedules."""
    from poolq.jobs import Settings
    from poolq.worker import run_beat

    run_beat(Settings(), loglevel=loglevel)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", default=5555, show_default=True, type=int)
@click.option("--address", default="127.0.0.1", show_default=True, help="listen address")
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(port: int, address: str, flower_args: tuple[str, ...]) -> None:
    """Run Flower on poolq's broker, behind HTTP basic auth: the login is POOLQ_FLOWER_BASIC_AUTH
    (user:password). Without POOLQ_REDIS_URL: the local stack's broker and login (`poolq dev status`
    shows it). Extra options go to Flower."""
    from poolq.jobs import configure_logging
    from poolq.worker import create_celery_app

    # A running local stack's broker and login, unless the environment names a broker (POOLQ_REDIS_URL).
    settings = cli_settings(BROKER_SETTINGS, service="redis")
    if settings.access.flower_basic_auth is None:
        click.echo("error: set POOLQ_FLOWER_BASIC_AUTH=user:password (Flower shows every job's tasks; it asks for "
                   "this login), or run it beside a local stack (`poolq dev up`), whose login it uses", err=True)
        sys.exit(2)
    configure_logging(settings.observability.log_format, "INFO")  # --logging=none: tornado keeps these handlers
    # In this process's own argv list, never on a command line: `ps` shows no password.
    login = f"--basic-auth={settings.access.flower_basic_auth.get_secret_value()}"
    argv = ["flower", f"--port={port}", f"--address={address}", "--logging=none", login, *flower_args]
    sys.exit(create_celery_app(settings).start(argv=argv) or 0)


@main.command()
@click.option("--dir", "state_dir", default=".poolq-demo", show_default=True, type=click.Path(path_type=Path))
@click.option("--keep", is_flag=True, help="leave the stack running afterwards")
@click.option("--redis-port", default=6390, show_default=True, type=int, help="0: any free port")
@click.option("--s3-port", default=8333, show_default=True, type=int, help="0: any free port")
@click.option("--api-port", default=8000, show_default=True, type=int, help="0: any free port")
def demo(state_dir: Path, keep: bool, redis_port: int, s3_port: int, api_port: int) -> None:
    """Start a local stack, embed the sample corpus over HTTP, show results, stop the stack."""
    from poolq.api.cli.commands.demo_command import run_demo
    from poolq.devtools.devstack.stack import StackPorts

    sys.exit(run_demo(state_dir, keep=keep, ports=StackPorts(redis=redis_port, s3=s3_port, api=api_port)))


# `poolq bench` alone runs the dtype comparison below; its subcommands are other suites (bench_commands.py).
@main.group(cls=LazyGroup, lazy_commands={"families": f"{_COMMANDS}.bench_commands:families",
                                          "jobpath": f"{_COMMANDS}.bench_commands:jobpath"}, invoke_without_command=True)
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True)
@click.option("--rounds", default=3, show_default=True, type=int, help="interleaved rounds; medians are reported")
@click.option("--texts", "num_mixed", default=200, show_default=True, type=int, help="texts in the mixed corpus")
@click.option("--threads", default=None, type=int, help="torch threads (default: torch's)")
@click.option("--dtypes", default="auto,float32,int8", show_default=True,
              help="poolq's compute dtypes to run, comma-separated (auto: the default path; float32, bfloat16, int8; "
              "DTYPE+fused: with the experimental fused bias+LayerNorm)")
@click.option("--baselines", default="torch,onnx,openvino", show_default=True,
              help="sentence-transformers backends beside torch fp32, where importable")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.pass_context
def bench(context: click.Context, model: str, rounds: int, num_mixed: int, threads: int | None, dtypes: str, baselines: str,
          as_json: bool) -> None:
    """poolq's engine in each dtype vs sentence-transformers: same texts and token counts, one process.
    `poolq bench families`: long documents through ModernBERT- and Qwen3-shaped models."""
    if context.invoked_subcommand is not None:
        given = [p.opts[0] for p in context.command.params
                 if context.get_parameter_source(p.name or "") is click.core.ParameterSource.COMMANDLINE]
        if given:  # they would be ignored: say so rather than run without them
            raise click.UsageError(f"{', '.join(given)}: options of `poolq bench` itself; "
                                   f"put `poolq bench {context.invoked_subcommand}`'s options after its name")
        return
    from poolq.devtools.bench.variant_benchmark import run_variants

    report = run_variants(model, dtypes=tuple(dtypes.split(",")), backends=tuple(baselines.split(",")), rounds=rounds,
                          num_mixed=num_mixed, threads=threads)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    print_bench(report)


def print_bench(report: dict) -> None:
    click.echo(f"{report['model']}  {report['cpu_model']}  ISA: {' '.join(report['isa_flags']) or '-'}  "
               f"auto dtype: {report['auto_dtype']}  threads={report['threads']}  (medians of {report['rounds']} rounds)")
    for reason in report["skipped"]:
        click.echo(f"  not run: {reason}")
    peaks = "  ".join(f"{dtype} {gflops:,.0f}" for dtype, gflops in report.get("gemm_peak_gflops", {}).items())
    click.echo(f"GEMM peak {'x'.join(map(str, report.get('gemm_shape', [])))} (GFLOP/s, median): {peaks or '-'}; "
               "MFU = model FLOPs / s / the peak in the variant's dtype (docs/benchmarks.md)")
    click.echo(f"{'corpus':7} {'variant':20} {'dtype':9} {'tok/s':>8} {'vs ST fp32':>10} {'min cos':>9} {'MFU':>6}")
    for corpus in report["corpora"]:
        for v in corpus["variants"]:
            utilisation = f"{v['mfu']:>6.1%}" if v.get("mfu") is not None else f"{'-':>6}"
            click.echo(f"{corpus['corpus']:7} {v['name']:20} {v['dtype']:9} {v['tokens_per_s']:>8.0f} "
                       f"{v['vs_st_fp32']:>10.2f} {v['min_cos_vs_st_fp32']:>9.5f} {utilisation}")
