"""The worker edge: Celery tasks, the workers' start-up, the lane's server, beat, the reconciler, and the in-process runner.

The names the edges use are this package's face, declared once in ``__init__.pyi`` and loaded
on first use (``lazy_loader``), as ``poolq.jobs`` does.
"""
import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
