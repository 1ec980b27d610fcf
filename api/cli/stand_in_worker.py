"""A compute worker whose engine for one model is the benchmark's stand-in (`poolq bench jobpath --stack`).

``python -m poolq.api.cli.stand_in_worker '<json>'`` (``model``, ``dtype``, ``hostname``): a plain
``poolq worker --queues gpu``, settings from POOLQ_* as ever, except that each pool child's context
serves ``model`` with the stand-in engine (``devtools/bench/jobpath/stand_in_engine.py``: the real
engine's tokenizer, scheduler, loop and poolers, no forward) and says so in the log. Only the bench
starts it; no product path selects the stand-in.
"""
from __future__ import annotations

import json
import logging
import sys

STAND_IN_SERVES = "stand-in engine serves"  # what the log says, once per pool child: the bench checks it


def run(options: dict) -> None:
    from poolq.api.cli.main import main
    from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_engine
    from poolq.worker import celery_tasks

    build = celery_tasks.build_worker_context

    def with_stand_in(app, settings, loads_models: bool = True):
        ctx = build(app, settings, loads_models)
        if loads_models:
            ctx.engines.use(options["model"], stand_in_engine(options["model"], dtype=options["dtype"]))
            logging.getLogger(__name__).warning("%s %s (%s)", STAND_IN_SERVES, options["model"], options["dtype"])
        return ctx

    # register_tasks' context() looks the builder up when a pool child first asks, after the fork
    celery_tasks.build_worker_context = with_stand_in
    main(["worker", "--queues", "gpu", "--hostname", options["hostname"]])


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
