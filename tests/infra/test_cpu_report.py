"""infra/bench/cpu_report.sh, the one command for the compute-dtype measurements on a new CPU:
every step it would run exists and takes its options (each is asked for ``--help``, or run where
that is cheap), without timing anything here."""
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _steps() -> list[list[str]]:
    done = subprocess.run(["bash", "infra/bench/cpu_report.sh", "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return [shlex.split(line) for line in done.stdout.splitlines() if line.strip()]


def _as_help(argv: list[str]) -> list[str]:
    """The step's own entry point with ``--help`` (options checked by argparse/click, nothing run)."""
    first_option = next(i for i, arg in enumerate(argv) if arg.startswith("--"))
    return [sys.executable, *argv[1:first_option], "--help"]  # the script, or the module and its subcommand


def test_every_step_of_the_report_runs_or_answers_help():
    steps = _steps()
    assert [step[0].rsplit("/", 1)[-1] for step in steps].count("python") == 2  # the ST backend environments
    for argv in steps:
        if argv[1] == "-c":  # the machine line: cheap, run it
            out = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, check=True)
            assert "flags:" in out.stdout and "auto:" in out.stdout
        elif argv[1:3] == ["-m", "pytest"]:
            assert all((ROOT / path).exists() for path in argv if path.startswith("tests/"))
        else:
            helped = subprocess.run(_as_help(argv), cwd=ROOT, capture_output=True, text=True)
            assert helped.returncode == 0, (argv, helped.stderr[-2000:])
            options = [arg for arg in argv if arg.startswith("--")]
            assert all(option in helped.stdout for option in options), (argv, helped.stdout)
