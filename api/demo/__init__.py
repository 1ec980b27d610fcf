"""`poolq demo`: the whole path on a local stack, with a shipped sample corpus."""
from poolq.api.demo.demo import run_demo

__all__ = ["run_demo"]
