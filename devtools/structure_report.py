"""``python -m poolq.devtools.structure_report [--json | --markdown] [--verbose] [--walk NAME=MODULE:FUNCTION]``:
the product's structure, measured from its source (docs/structure.md says what each measure means).

Markdown (the default) prints tables for docs; ``--json`` the whole report, for tests and diffs.
``--verbose`` lists what the tables count (folder edges, every folder, the files behind each concept,
each walk's stops). ``--walk`` replaces the default walks (plan_job, run_shard, POST /v1/embeddings).
"""
from __future__ import annotations

import argparse
import sys

from poolq.devtools.structure.call_walk import WalkError
from poolq.devtools.structure.render import as_json, as_markdown
from poolq.devtools.structure.report import build_report


def _walk(text: str) -> tuple[str, str]:
    name, equals, start = text.partition("=")
    if not equals or not name or ":" not in start:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=MODULE:FUNCTION, as plan=poolq.jobs.steps.planner:plan_job")
    return name, start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m poolq.devtools.structure_report", description=__doc__.split("\n\n")[0])
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="the whole report as JSON")
    output.add_argument("--markdown", action="store_true", help="tables for docs (the default)")
    parser.add_argument("--verbose", action="store_true", help="list what the tables count")
    parser.add_argument("--walk", action="append", type=_walk, metavar="NAME=MODULE:FUNCTION",
                        help="a call walk to run instead of the default ones (repeatable)")
    arguments = parser.parse_args(argv)
    try:
        report = build_report(walks=tuple(arguments.walk) if arguments.walk else None)
    except WalkError as exc:
        parser.exit(2, f"structure report: {exc}\n")
    sys.stdout.write(as_json(report) + "\n" if arguments.json else as_markdown(report, arguments.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
