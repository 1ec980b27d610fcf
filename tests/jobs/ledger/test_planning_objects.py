"""A job's planning objects: each section's data, by name, where the layout says, on both stores."""
import uuid

import pytest

from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.ledger.planning_objects import ERRORS_NAME, SKIPS_NAME, SPILL_NAME, PlanningObjects
from poolq.storage import LocalObjectStore, ObjectNotFoundError


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.integration)])
def store(request, tmp_path):
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    return request.getfixturevalue("new_buckets").store("planning-objects")


def test_a_section_object_is_written_and_read_back_under_its_layout_key(store):
    layout = JobLayout("jobs", uuid.uuid4().hex)
    objects = PlanningObjects(store, layout)
    objects.put(3, SKIPS_NAME, b"skips")
    objects.put_chunks(3, SPILL_NAME, iter([b"a\t1\t1\n", b"b\t2\t2\n"]))
    assert store.get(layout.section_object(3, SKIPS_NAME)) == b"skips"
    with objects.open(3, SPILL_NAME) as stream:
        assert stream.read() == b"a\t1\t1\nb\t2\t2\n"
    assert objects.key(3, ERRORS_NAME) == layout.section_object(3, ERRORS_NAME)


def test_a_deleted_section_object_is_gone_and_its_neighbours_stay(store):
    objects = PlanningObjects(store, JobLayout("jobs", uuid.uuid4().hex))
    objects.put(0, SPILL_NAME, b"zero")
    objects.put(1, SPILL_NAME, b"one")
    objects.delete(0, SPILL_NAME)
    with pytest.raises(ObjectNotFoundError):
        objects.get(0, SPILL_NAME)
    assert objects.get(1, SPILL_NAME) == b"one"
