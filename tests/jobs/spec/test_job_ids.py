"""Job, file and batch ids sort by creation: strictly increasing within a process, even many to
one millisecond or when the clock steps back."""
import threading

from poolq.jobs.spec import job_ids as job_module
from poolq.jobs.spec.job_ids import is_job_id, new_job_id
from poolq.products.batches.batch_layout import new_file_id


def test_ids_made_in_a_tight_loop_strictly_increase():
    ids = [new_job_id() for _ in range(20_000)]  # hundreds share each millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(is_job_id(i) for i in ids)


def test_ids_of_one_millisecond_and_after_the_clock_stepped_back_still_increase(monkeypatch):
    # Given a clock that stands still, then goes back a second
    now = [1_800_000_000_000_000_000]
    monkeypatch.setattr(job_module.time, "time_ns", lambda: now[0])
    same_ms = [new_job_id() for _ in range(5)]
    now[0] -= 1_000_000_000
    after_step_back = [new_job_id() for _ in range(3)]
    # Then every id is later than the one before, and keeps the millisecond it counts up from
    ids = same_ms + after_step_back
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {i[:12] for i in ids} == {f"{1_800_000_000_000:012x}"}
    assert [int(i[12:], 16) - int(ids[0][12:], 16) for i in ids] == list(range(8))


def test_ids_made_by_several_threads_are_all_distinct_and_increase_per_thread():
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_file_id() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(ids == sorted(ids) for ids in per_thread)
    assert len({i for ids in per_thread for i in ids}) == 8_000
