"""`poolq bench`'s suites beyond its default one (main.py): `poolq bench families`, `poolq bench jobpath`."""
from __future__ import annotations

import json
from pathlib import Path

import click

from poolq.devtools.bench.families.random_families import FAMILIES, SIZES  # numpy, no torch: --help stays quick


def _int_list(context: click.Context, parameter: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in value.split(","))
    except ValueError:
        raise click.BadParameter(f"comma-separated token counts, got {value!r}") from None


def _name_list(context: click.Context, parameter: click.Parameter, value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in FAMILIES]
    if unknown or not names:
        raise click.BadParameter(f"unknown {', '.join(unknown) or 'empty list'}; known: {', '.join(FAMILIES)}")
    return names


@click.command()
@click.option("--families", "names", default=",".join(FAMILIES), show_default=True, callback=_name_list,
              help="comma-separated")
@click.option("--size", type=click.Choice(list(SIZES)), default="realistic", show_default=True,
              help="realistic: the real models' shapes (ModernBERT hidden 768, 12 layers; Qwen3 hidden 1024, 28 layers); "
              "tiny: hidden 64, 2 layers, a smoke run whose speeds mean nothing")
@click.option("--modernbert-layers", type=click.IntRange(min=1), default=None,
              help="fewer layers for a shorter run (default: the size's); each layer does the same work")
@click.option("--qwen3-layers", type=click.IntRange(min=1), default=None, help="likewise")
@click.option("--lengths", default="8000,1000,500,250", show_default=True, callback=_int_list,
              help="tokens per document, specials included, comma-separated (8,192-token windows)")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="interleaved rounds; medians are reported")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="torch threads (default: torch's)")
@click.option("--batch-size", default=2, show_default=True, type=click.IntRange(min=1),
              help="sentence-transformers' encode batch size")
@click.option("--dtypes", default="float32,auto", show_default=True, help="comma-separated: float32, float16, bfloat16, auto")
@click.option("--vocab", default=8192, show_default=True, type=click.IntRange(min=100), help="the trained tokenizer's vocabulary")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="also write the whole report here, as JSON")
@click.option("--markdown", is_flag=True, help="print the table as Markdown, ready for docs/benchmarks.md")
def families(names: tuple[str, ...], size: str, modernbert_layers: int | None, qwen3_layers: int | None,
             lengths: tuple[int, ...], rounds: int, threads: int | None, batch_size: int, dtypes: str, vocab: int,
             json_path: Path | None, markdown: bool) -> None:
    """Long documents through a ModernBERT- and a Qwen3-shaped random model: poolq packed beside
    sentence-transformers padded, one process, interleaved rounds (progress on stderr)."""
    from poolq.devtools.bench.families.families_report import render
    from poolq.devtools.bench.families.families_run import InvalidRun, run_families
    from poolq.devtools.bench.families.random_families import sized_family

    if json_path is not None and not json_path.parent.is_dir():  # found out now, not after the run
        raise click.BadParameter(f"{json_path.parent} is not a directory", param_hint="--json")
    layers = {"modernbert": modernbert_layers, "qwen3": qwen3_layers}
    models = [sized_family(name, size, layers[name]) for name in names]
    try:
        report = run_families(models, lengths=lengths, dtypes=tuple(dtypes.split(",")), rounds=rounds, batch_size=batch_size,
                              threads=threads, vocab=vocab, progress=lambda line: click.echo(line, err=True))
    except InvalidRun as invalid:
        raise click.UsageError(str(invalid)) from None
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    click.echo(render(report, markdown=markdown))


def _positive_ints(context: click.Context, parameter: click.Parameter, value: str) -> tuple[int, ...]:
    numbers = _int_list(context, parameter, value)
    if not numbers or min(numbers) < 1:
        raise click.BadParameter(f"positive whole numbers, comma-separated, got {value!r}")
    return numbers


@click.command()
@click.option("--model", default="all-MiniLM-L6-v2", show_default=True, help="whose tokenizer, shapes and poolers")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True)
@click.option("--lengths", default="64,512", show_default=True, callback=_positive_ints,
              help="tokens per document, specials included, comma-separated")
@click.option("--tokens-per-run", default=262_144, show_default=True, type=click.IntRange(min=64),
              help="the large input's tokens per length (the small one: a quarter)")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1), help="medians are reported")
@click.option("--cores", default="1,2", show_default=True, callback=_positive_ints,
              help="core counts: one worker pinned to each (and, above one, as many one-core workers at once)")
@click.option("--requests", default=300, show_default=True, type=click.IntRange(min=1),
              help="/v1/embeddings requests (and engine calls, /healthz calls) timed one at a time")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=1), help="profile lines printed per length")
@click.option("--profile-out", default=Path("jobpath-profile"), show_default=True, type=click.Path(path_type=Path),
              help="the profiles go to PROFILE_OUT-<length>.pstats (python -m pstats FILE)")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="also write the whole report here, as JSON")
@click.option("--stack", is_flag=True, help="also run the jobs on a real stack (poolq dev up on free ports: Redis, "
              "SeaweedFS, the API, a control worker and a stand-in compute worker)")
def jobpath(model: str, dtype: str, lengths: tuple[int, ...], tokens_per_run: int, rounds: int, cores: tuple[int, ...],
            requests: int, top: int, profile_out: Path, json_path: Path | None, stack: bool) -> None:
    """The whole job path with a stand-in engine (the model's tokenizer, shapes and poolers; no forward):
    documents/s and tokens/s per core count, a profile, host reads per step, and /v1/embeddings latency
    (progress on stderr)."""
    import os

    from poolq.api.cli.jobpath_wiring import JobpathOptions, run_jobpath
    from poolq.devtools.bench.jobpath.jobpath_report import render

    usable = len(os.sched_getaffinity(0))
    if max(cores) > usable:
        raise click.BadParameter(f"{max(cores)} cores asked for; this process may use {usable}", param_hint="--cores")
    for path, hint in ((json_path, "--json"), (profile_out, "--profile-out")):
        if path is not None and not path.resolve().parent.is_dir():  # found out now, not after the run
            raise click.BadParameter(f"{path.resolve().parent} is not a directory", param_hint=hint)
    options = JobpathOptions(model, dtype, lengths, tokens_per_run, rounds, cores, requests, top, profile_out, stack)
    report = run_jobpath(options, progress=lambda line: click.echo(line, err=True))
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    click.echo(render(report))
