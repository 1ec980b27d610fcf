"""poolq's public face, the names a user types: ``from poolq import Client, PoolingEngine``.

    Client                the HTTP API's Python client (poolq.api.client.poolq_client.PoolqClient)
    PoolqError            a refusal from the API (status_code, detail, retry_after)
    PoolqConnectionError  the API could not be reached
    PoolqProtocolError    what answered is not the poolq API (a wrong URL, a proxy's page)
    PoolingEngine         the engine the workers run, as a library (loads torch on first use)
    PoolingTask           what the engine computes: embed, sparse_embed, classify, ...

This file is the repository root's ``__init__.py``: the root installs as the package ``poolq`` and its
seven folders as ``poolq.engine``, ``poolq.jobs``, ``poolq.products``, ``poolq.worker``,
``poolq.api``, ... (setup.py). Every import of ``poolq.<package>`` runs this file first, so it imports
nothing itself: each name loads its module on first use, and a worker importing
``poolq.engine.scheduling.scheduler`` never pulls in the HTTP client, nor the API torch.
"""
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ loads on first use, as the type checker should see it
    from poolq.api.client.poolq_client import PoolqClient as Client
    from poolq.api.client.poolq_client import PoolqConnectionError, PoolqError, PoolqProtocolError
    from poolq.engine import PoolingTask
    from poolq.engine.engine import PoolingEngine

# name -> (module, attribute)
_FACE = {
    "Client": ("poolq.api.client.poolq_client", "PoolqClient"),
    "PoolqError": ("poolq.api.client.poolq_client", "PoolqError"),
    "PoolqConnectionError": ("poolq.api.client.poolq_client", "PoolqConnectionError"),
    "PoolqProtocolError": ("poolq.api.client.poolq_client", "PoolqProtocolError"),
    "PoolingEngine": ("poolq.engine.engine", "PoolingEngine"),
    "PoolingTask": ("poolq.engine.request", "PoolingTask"),
}


def __getattr__(name: str):
    if name in _FACE:
        module, attribute = _FACE[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'poolq' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_FACE])


__all__ = ["Client", "PoolingEngine", "PoolingTask", "PoolqConnectionError", "PoolqError", "PoolqProtocolError"]
