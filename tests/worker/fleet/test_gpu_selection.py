"""``poolq worker --gpus``: indices count within an inherited CUDA_VISIBLE_DEVICES, GPU UUIDs and
MIG ids pass as given, anything else is refused naming the entry."""
import pytest
from click.testing import CliRunner

from poolq.api.cli.main import main
from poolq.worker.fleet.gpu_selection import GpuSelectionError, GpuSlot, gpu_slots, split_gpus
from poolq.worker.fleet.worker_set import WorkerOptions, compute_worker_commands

UUID = "GPU-8f3a2c1e-5b7d-4e9f-a0b1-c2d3e4f5a6b7"
MIG = "MIG-6ff7d9e4-3c1c-5a3c-a4d6-0f3c0e8e58ff"
OLD_MIG = f"MIG-{UUID}/7/0"


def visible(gpus: str, inherited: str | None) -> list[str]:
    return [slot.visible_devices for slot in gpu_slots(split_gpus(gpus), inherited)]


@pytest.mark.parametrize("gpus, inherited, expected", [
    ("0,1", None, ["0", "1"]),  # nothing inherited: an index is the device's own
    ("1", "2,3", ["3"]),  # inherited 2,3: index 1 is GPU 3, as CUDA numbers them in the child
    ("0, 1", "2,3", ["2", "3"]),
    ("1", f"{UUID},GPU-0a1b", ["GPU-0a1b"]),  # an inherited UUID list is indexed the same way
    (f"{UUID},{MIG},{OLD_MIG}", "2,3", [UUID, MIG, OLD_MIG]),  # device ids pass as given
    ("GPU-8f3a", None, ["GPU-8f3a"]),  # a UUID prefix, which CUDA accepts
])
def test_each_entry_becomes_the_childs_cuda_visible_devices(gpus, inherited, expected):
    assert visible(gpus, inherited) == expected


def test_slot_names_fit_a_celery_node_name():
    slots = gpu_slots(["1", OLD_MIG], "4,5")
    assert slots == [GpuSlot("gpu1", "5"), GpuSlot(f"MIG-{UUID}-7-0", OLD_MIG)]


@pytest.mark.parametrize("gpus, inherited, named", [
    ("0,x", None, "'x'"),
    ("-1", None, "'-1'"),
    ("GPU-xyz", None, "'GPU-xyz'"),
    ("MIG-GPU-8f3a/1", None, "'MIG-GPU-8f3a/1'"),  # the old MIG form needs its instance ids
    ("cuda:0", None, "'cuda:0'"),
])
def test_an_entry_that_is_no_gpu_is_refused_by_name(gpus, inherited, named):
    with pytest.raises(GpuSelectionError, match=f"--gpus entry {named} is not a GPU index"):
        gpu_slots(split_gpus(gpus), inherited)


def test_an_index_past_the_inherited_list_names_both():
    with pytest.raises(GpuSelectionError, match=r"--gpus entry 2: the inherited CUDA_VISIBLE_DEVICES='2,3' lists 2 GPU"):
        gpu_slots(["2"], "2,3")
    with pytest.raises(GpuSelectionError, match=r"CUDA_VISIBLE_DEVICES='' lists 0 GPU\(s\).*indices: none"):
        gpu_slots(["0"], "")  # set but empty: CUDA shows this process no GPU


@pytest.mark.parametrize("gpus, inherited", [("0,0", None), ("0,1", "3,3"), (f"{UUID},{UUID}", None), (",", None)])
def test_no_gpu_or_one_gpu_twice_is_refused(gpus, inherited):
    with pytest.raises(GpuSelectionError, match="twice|both select|names no GPU"):
        gpu_slots(split_gpus(gpus), inherited)


def test_the_per_gpu_workers_index_into_the_inherited_devices():
    options = WorkerOptions(queues=("gpu",))
    commands = compute_worker_commands(options, ["1", UUID], executable="py", environ={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert [command.env["CUDA_VISIBLE_DEVICES"] for command in commands] == ["3", UUID]
    assert all(command.env["POOLQ_DEVICE"] == "cuda" for command in commands)
    hostnames = [argv[argv.index("--hostname") + 1] for argv in (command.argv for command in commands)]
    assert hostnames == ["poolq-gpu1@%h", f"poolq-{UUID}@%h"]


@pytest.fixture
def no_worker_starts(monkeypatch):
    def started(*args, **kwargs):
        raise AssertionError("a worker set was started for a --gpus value that should be refused")

    monkeypatch.setattr("poolq.worker.run_worker_set", started)  # what the CLI imports: the store is not even asked


@pytest.mark.parametrize("gpus, inherited, said", [
    ("0,gpu1", None, "'gpu1' is not a GPU index"),
    ("2", "0,1", "--gpus entry 2: the inherited CUDA_VISIBLE_DEVICES='0,1' lists 2 GPU(s)"),
])
def test_the_cli_refuses_a_bad_gpus_value_naming_the_entry(monkeypatch, no_worker_starts, gpus, inherited, said):
    if inherited is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", inherited)
    result = CliRunner().invoke(main, ["worker", "--gpus", gpus])
    assert result.exit_code == 2, result.output
    assert "--gpus" in result.output and said in " ".join(result.output.split()), result.output


def test_the_cli_takes_uuids_and_mig_ids(monkeypatch):
    seen = []

    def run_worker_set(settings, options, gpus, control):
        seen.append(gpus)
        return 0

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr("poolq.worker.run_worker_set", run_worker_set)
    result = CliRunner().invoke(main, ["worker", "--gpus", f"{UUID},{OLD_MIG}", "--queues", "gpu"])
    assert result.exit_code == 0, result.output
    assert seen == [[UUID, OLD_MIG]]
