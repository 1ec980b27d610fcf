"""infra/gpu/check.py runs where the GPU machine leaves it: a CUDA torch, no poolq install, no job stack.

Here (no GPU) it must get through all of its imports and stop at the CUDA check, with the job
stack's packages and the editable install of poolq made unimportable."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOB_STACK = ("pydantic", "pydantic_settings", "celery", "kombu", "redis", "redbeat", "boto3", "botocore",
             "fastapi", "starlette", "uvicorn", "click", "rich", "httpx", "pyarrow")

# Runs check.py with poolq's own imports of JOB_STACK refused (third-party code may still probe
# for them: transformers looks for rich) and every import hook of the editable install removed.
PRELUDE = f"""
import importlib.abc, runpy, sys
BLOCKED, REPO = {JOB_STACK!r}, {str(REPO)!r}
def importer():
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith("<") or "importlib" in frame.f_code.co_filename):
        frame = frame.f_back
    return "" if frame is None else frame.f_code.co_filename
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        where = importer()
        if name.split(".")[0] in BLOCKED and (where.startswith(REPO) or "poolq-view-" in where):
            raise ImportError(f"blocked: {{where}} imports {{name}} (job stack)")
        return None
sys.meta_path[:] = [Block()] + [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.argv = ["check.py"]
runpy.run_path(REPO + "/infra/gpu/check.py", run_name="__main__")
"""

def test_the_gpu_check_imports_no_job_stack_and_needs_no_poolq_install(tmp_path):
    result = subprocess.run([sys.executable, "-c", PRELUDE], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    output = result.stdout + result.stderr
    assert "blocked:" not in output, output
    assert result.returncode == 2 and "no CUDA device" in output, output


def test_the_gpu_check_script_installs_nothing():
    script = (REPO / "infra" / "gpu" / "check.sh").read_text()
    commands = [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert not any(re.search(r"\bpip3?\b", line) for line in commands), commands
