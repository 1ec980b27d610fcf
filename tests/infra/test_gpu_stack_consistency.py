"""One supported GPU stack (torch, CUDA, Triton), stated once in infra/gpu/supported.py, and every file
that installs, runs or describes a GPU worker agrees with it: the worker image (its base, its pip
line, its compute dtype, what it copies), compose and Kubernetes (the dtype they run it with), the
operations page's install line, the GPU check, and the torch the test suite installs."""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "infra" / "gpu"
if str(GPU_DIR) not in sys.path:  # as `python3 infra/gpu/check.py` finds it
    sys.path.insert(0, str(GPU_DIR))

import supported  # noqa: E402

DOCKERFILE = ROOT / "infra" / "docker" / "worker.Dockerfile"
COMPOSE = ROOT / "infra" / "docker-compose.yml"
K8S = sorted((ROOT / "infra" / "k8s").glob("*.yaml"))
OPERATIONS = ROOT / "docs" / "operations.md"
DTYPE_NAMES = ("POOLQ_COMPUTE_DTYPE", "POOLQ_DTYPE")


def _dockerfile() -> str:
    return DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")


def _instructions(name: str) -> list[str]:
    return re.findall(rf"(?m)^{name}\s+(.*)$", _dockerfile())


def _image_env() -> dict[str, str]:
    return dict(part.split("=", 1) for line in _instructions("ENV") for part in shlex.split(line))


def _pins(text: str) -> dict[str, str]:
    """``name==version`` pins of a pip line."""
    return dict(re.findall(r"\b([A-Za-z0-9_.-]+)==([0-9][A-Za-z0-9.+]*)", text))


def test_the_worker_image_installs_the_supported_stack():
    assert _instructions("FROM") == [supported.BASE_IMAGE]
    installs = [line for line in _instructions("RUN") if re.search(r"\bpip3? install\b", line)]
    torch_lines = [line for line in installs if "torch" in _pins(line)]
    assert len(torch_lines) == 1, installs
    assert _pins(torch_lines[0]) == {"torch": supported.TORCH, "triton": supported.TRITON}
    assert torch_lines[0].split() == supported.PIP_INSTALL.split()


def test_the_worker_image_runs_dtype_auto_on_cuda():
    env = _image_env()
    assert env["POOLQ_COMPUTE_DTYPE"] == supported.DTYPE == "auto" and env["POOLQ_DEVICE"] == "cuda"
    assert "POOLQ_DTYPE" not in env  # one name for one setting


def test_the_worker_image_copies_every_folder_poolq_installs_from():
    # setup.py installs the root's __init__.py as poolq and these folders as poolq.<folder>
    [folders] = re.findall(r"FOLDERS = \(([^)]*)\)", (ROOT / "setup.py").read_text(encoding="utf-8"))
    copied = {source for line in _instructions("COPY") for source in shlex.split(line)[:-1]}
    assert {*re.findall(r'"(\w+)"', folders), "__init__.py", "setup.py", "pyproject.toml"} <= copied, copied


def _dtypes_set(environment: dict) -> list[str]:
    return [str(environment[name]) for name in DTYPE_NAMES if name in (environment or {})]


def test_compose_and_kubernetes_run_the_worker_image_with_its_dtype():
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    worker = compose["services"]["worker"]
    assert worker["build"]["dockerfile"] == "infra/docker/worker.Dockerfile"
    assert set(_dtypes_set(compose["x-poolq-env"]) + _dtypes_set(worker.get("environment"))) <= {supported.DTYPE}
    documents = [doc for path in K8S for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    [deployment] = [d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "poolq-worker"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    worker_env = {item["name"]: item.get("value") for item in container.get("env", [])}
    config = next(d["data"] for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "poolq-config")
    assert container["image"].startswith("poolq-worker:")
    assert set(_dtypes_set(worker_env) + _dtypes_set(config)) <= {supported.DTYPE}


def test_the_operations_page_states_the_supported_stack_and_its_install_line():
    page = OPERATIONS.read_text(encoding="utf-8")
    section = page[page.index("## GPU workers"):]
    section = re.sub(r"\s+", " ", section[: section.index("\n## ", 1)])
    assert f"`pip install torch=={supported.TORCH} triton=={supported.TRITON}`" in section
    for fact in (f"Python {supported.PYTHON}", f"torch {supported.TORCH}", f"CUDA {supported.CUDA}",
                 f"Triton {supported.TRITON}", f"{supported.MIN_DRIVER} series", "compute dtype `auto`",
                 "infra/gpu/supported.py"):
        assert fact in section, fact


def test_no_gpu_file_names_another_torch_version():
    # The deployment files, the GPU check and the GPU section of the docs name no torch but the supported
    # one (the check reads supported.py; it prints the machine's own version only as what it found).
    files = [DOCKERFILE, COMPOSE, *K8S, GPU_DIR / "check.sh", GPU_DIR / "check.py", OPERATIONS]
    version = re.compile(r"(?i)\btorch\b[^\d\n.;]{0,16}?(\d+\.\d+(?:\.\d+)?)")  # torch 2.13.0, torch==2.13.0, torch, 2.11
    found = {path.name: set(version.findall(path.read_text(encoding="utf-8"))) for path in files}
    assert {name: versions - {supported.TORCH} for name, versions in found.items() if versions - {supported.TORCH}} == {}
    assert "import supported" in (GPU_DIR / "check.py").read_text(encoding="utf-8")


def test_the_supported_torch_is_the_one_the_test_suite_installs():
    for script in ("test.sh", "demo.sh"):
        pins = _pins((ROOT / "infra" / script).read_text(encoding="utf-8"))
        assert pins["torch"] == supported.TORCH, script
