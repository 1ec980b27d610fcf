"""Products built on the job core: OpenAI-compatible batches, schedules, estimates, sinks and webhooks.

The names the edges use are this package's face, declared once in ``__init__.pyi`` and loaded
on first use (``lazy_loader``), as ``poolq.jobs`` does.
"""
import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
