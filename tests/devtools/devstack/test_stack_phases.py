"""`poolq dev up` starts the stack a phase at a time, the services of a phase together (the
stores, then the programs that need them), and `down` stops it in the reverse phases."""
from pathlib import Path

from poolq.devtools.devstack import stack as stack_module
from poolq.devtools.devstack.stack import SERVICES, LocalStack, StackPorts


def _recording_stack(tmp_path: Path, events: list[str], monkeypatch) -> LocalStack:
    local = LocalStack(tmp_path, StackPorts(redis=1, s3=2, api=3))
    for number, name in enumerate(SERVICES, start=100):
        def start(state, name=name, pid=number):
            events.append(f"launch {name}")
            return pid, lambda: events.append(f"ready {name}")
        monkeypatch.setattr(local, f"_start_{name}", start)
    monkeypatch.setattr(local, "_require_free", lambda port, service: None)
    monkeypatch.setattr(local, "_create_dev_key", lambda state: "pq_test")
    monkeypatch.setattr(stack_module, "_is_ours", lambda pid, name: False)
    return local


def test_up_launches_each_phase_together_and_waits_for_it_before_the_next(tmp_path, monkeypatch):
    events: list[str] = []
    state, started = _recording_stack(tmp_path, events, monkeypatch).up(log=lambda line: None)
    assert events == ["launch redis", "launch seaweed", "ready redis", "ready seaweed",
                      "launch api", "launch worker", "launch beat", "ready api", "ready worker", "ready beat"]
    assert started == list(SERVICES) and state.pids == {name: 100 + i for i, name in enumerate(SERVICES)}


def test_down_stops_the_programs_before_the_stores(tmp_path, monkeypatch):
    events: list[str] = []
    local = _recording_stack(tmp_path, events, monkeypatch)
    local.up(log=lambda line: None)
    stopping: list[int] = []
    monkeypatch.setattr(stack_module, "stop_pid", lambda pid, expect_in_cmdline: stopping.append(pid) or True)
    stopped = local.down()
    programs, stores = set(stopping[:3]), set(stopping[3:])
    assert programs == {102, 103, 104} and stores == {100, 101}
    assert sorted(stopped) == sorted(SERVICES) and local.load().pids == {}
