"""Jobs: the job model, its steps (submit, plan, shards, finalize) and the Celery edge.

The names the edges use are this package's face, declared once in ``__init__.pyi`` and loaded
on first use (``lazy_loader``): ``from poolq.jobs import submit_job`` imports ``jobs/steps/submit.py``
and what it needs, nothing else.
"""
import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
