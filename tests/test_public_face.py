"""``from poolq import Client, PoolingEngine``: the names README uses, stated once in the root's __init__.py."""
import subprocess
import sys

import pytest

import poolq
from poolq.api.client.poolq_client import PoolqClient, PoolqConnectionError, PoolqError
from poolq.engine.device.hardware import resolve_dtype
from poolq.engine.request import PoolingTask


def test_the_face_names_the_client_and_the_engine():
    from poolq import Client, PoolingEngine
    from poolq.engine.engine import PoolingEngine as engine_class

    assert (Client, PoolingEngine, poolq.PoolingTask) == (PoolqClient, engine_class, PoolingTask)
    assert (poolq.PoolqError, poolq.PoolqConnectionError) == (PoolqError, PoolqConnectionError)
    assert set(poolq.__all__) <= set(dir(poolq))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(poolq, "NoSuchThing")


def test_importing_a_package_below_the_face_loads_neither_torch_nor_the_http_client():
    probe = ("import sys, poolq.engine.scheduling.scheduler, poolq.jobs.spec; "
             "print('torch' in sys.modules, 'httpx' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "False"]


def test_the_engine_takes_auto_as_a_worker_does():
    from poolq import PoolingEngine

    engine = PoolingEngine.from_pretrained("all-MiniLM-L6-v2", device="cpu", dtype="auto")
    assert engine.config.dtype == resolve_dtype("auto", "cpu") != "auto"
    assert engine.embed(["a text"]).shape == (1, engine.dimensions)
