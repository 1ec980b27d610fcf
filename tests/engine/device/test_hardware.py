"""The compute dtype ``auto`` picks from the CPU's reported instruction sets (no guessing)."""
import pytest

from poolq.engine.device.hardware import cpu_flags, cpu_model, noted_flags, resolve_dtype

ZEN3 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx avx2 fma\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
ICE_LAKE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_vnni\n"
# Zen 4 (EPYC 9xx4): AVX-512 with BF16 and VNNI, no AMX.
EPYC_GENOA = ("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq "
              "avx512_vnni avx512_bf16 avx512vl\n")


@pytest.mark.parametrize("cpuinfo, device, expected", [
    (ZEN3, "cpu", "float32"),
    (ICE_LAKE, "cpu", "float32"),  # AVX-512 without BF16: bf16 is emulated, slower than fp32
    (SAPPHIRE_RAPIDS, "cpu", "bfloat16"),  # AMX
    (EPYC_GENOA, "cpu", "bfloat16"),  # AVX512-BF16 without AMX
])
def test_auto_is_bf16_only_where_the_hardware_runs_it_fast(cpuinfo, device, expected):
    assert resolve_dtype("auto", device, cpu_flags(cpuinfo)) == expected


@pytest.mark.parametrize("cpuinfo, explicit", [
    (ZEN3, False),  # no bf16 instructions: oneDNN would emulate bf16 GEMMs
    (ICE_LAKE, False),
    (SAPPHIRE_RAPIDS, False),  # AMX: SDPA's flash kernel runs its blocks on the tiles
    (EPYC_GENOA, True),  # AVX512-BF16 without AMX: two oneDNN GEMMs and a softmax beat the flash kernel
])
def test_bf16_attention_takes_two_gemms_only_with_avx512_bf16_and_no_amx(monkeypatch, cpuinfo, explicit):
    from poolq.engine.device import hardware

    assert hardware.explicit_bf16_attention(cpu_flags(cpuinfo)) is explicit
    monkeypatch.setattr(hardware, "cpu_flags", lambda: cpu_flags(cpuinfo))
    hardware.explicit_bf16_attention_cpu.cache_clear()
    try:
        assert hardware.explicit_bf16_attention_cpu() is explicit
    finally:
        hardware.explicit_bf16_attention_cpu.cache_clear()  # the real CPU's answer for the tests after this one


@pytest.mark.parametrize("device, capability, expected", [
    ("cuda", (9, 0), "bfloat16"),  # H100, H200
    ("cuda:1", (8, 0), "bfloat16"),  # A100
    ("cuda", (7, 5), "float16"),  # T4: bf16 is emulated there
    ("cuda:0", (7, 0), "float16"),  # V100
])
def test_auto_on_cuda_is_bf16_from_ampere_on_and_fp16_before(device, capability, expected):
    assert resolve_dtype("auto", device, cpu_flags(ZEN3), cuda_capability=capability) == expected


@pytest.mark.parametrize("reason", ["No CUDA GPUs are available",
                                    "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                                    "you must use the 'spawn' start method"])
def test_a_cuda_device_torch_cannot_read_is_an_error_naming_it_and_torchs_reason(monkeypatch, reason):
    import torch

    from poolq.engine.device.hardware import CudaDeviceError

    def unreadable(device):
        raise RuntimeError(reason)

    monkeypatch.setattr(torch.cuda, "get_device_capability", unreadable)  # no device; CUDA used before the fork
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(CudaDeviceError) as raised:
        resolve_dtype("auto", "cuda:0")
    message = str(raised.value)
    assert "'cuda:0'" in message and "CUDA_VISIBLE_DEVICES='3'" in message and reason in message


def test_a_torch_built_without_cuda_is_an_error_too(monkeypatch):
    # this machine's torch is a CPU build: its own words, not a guessed capability
    import torch

    from poolq.engine.device.hardware import CudaDeviceError

    if torch.cuda.is_available():
        pytest.skip("a CUDA build with a device: nothing to refuse")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(CudaDeviceError, match=r"CUDA device 'cuda': torch cannot read its compute capability.*CUDA"):
        resolve_dtype("auto", "cuda")


def test_an_explicit_dtype_is_kept_and_unreadable_flags_mean_none():
    assert resolve_dtype("float16", "cpu", cpu_flags(SAPPHIRE_RAPIDS)) == "float16"
    assert cpu_flags("no flags line here") == frozenset()


def test_settings_resolve_auto_once_for_the_engine_and_the_identity(monkeypatch, tmp_path):
    import poolq.engine.device.hardware as hardware
    from poolq.jobs.settings import Settings
    from poolq.worker.local_runner import local_context

    monkeypatch.setattr(hardware, "cpu_flags", lambda cpuinfo=None: frozenset({"avx2"}))
    settings = Settings(dtype="auto")
    assert settings.serving.compute_dtype == "float32" and settings.serving.engine_config().dtype == "float32"
    ctx = local_context(tmp_path, settings)
    assert ctx.engines.identity("all-MiniLM-L6-v2").endswith("/float32")


def test_noted_flags_are_the_ones_that_decide_fast_paths_in_a_fixed_order():
    assert noted_flags(frozenset({"amx_bf16", "sse2", "avx2", "fma"})) == ["avx2", "fma", "amx_bf16"]
    assert noted_flags(frozenset()) == []


def test_the_cpu_model_is_the_first_processors_model_name():
    assert cpu_model(ZEN3) == "AMD EPYC 7B13"
    assert cpu_model(SAPPHIRE_RAPIDS) is None


@pytest.mark.parametrize("cpuinfo, native", [(ZEN3, False), (ICE_LAKE, False), (SAPPHIRE_RAPIDS, True)])
def test_native_bf16_is_read_from_this_cpus_flags_and_decides_auto(monkeypatch, cpuinfo, native):
    from poolq.engine.device import hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda: cpu_flags(cpuinfo))
    hardware.native_bf16_cpu.cache_clear()
    try:
        assert hardware.native_bf16_cpu() is native
        assert resolve_dtype("auto", "cpu") == ("bfloat16" if native else "float32")
    finally:
        hardware.native_bf16_cpu.cache_clear()  # the real CPU's answer for the tests after this one


def test_auto_is_the_default_of_workers_the_cli_and_the_engine(monkeypatch):
    from poolq.engine import EngineConfig
    from poolq.jobs.settings import Settings

    monkeypatch.delenv("POOLQ_COMPUTE_DTYPE", raising=False)  # the suite's float32 pin (tests/conftest.py)
    monkeypatch.delenv("POOLQ_DTYPE", raising=False)
    assert Settings().serving.dtype == "auto" and EngineConfig().dtype == "auto"


@pytest.mark.parametrize("cpuinfo, expected", [(ZEN3, "float32"), (SAPPHIRE_RAPIDS, "bfloat16"),
                                               (EPYC_GENOA, "bfloat16")])
def test_a_default_worker_computes_in_what_its_cpu_runs_natively(monkeypatch, cpuinfo, expected):
    import poolq.engine.device.hardware as hardware
    from poolq.jobs.settings import Settings

    monkeypatch.delenv("POOLQ_COMPUTE_DTYPE", raising=False)
    monkeypatch.delenv("POOLQ_DTYPE", raising=False)
    monkeypatch.setattr(hardware, "cpu_flags", lambda text=None: cpu_flags(cpuinfo))
    settings = Settings()
    assert settings.serving.compute_dtype == expected and settings.serving.engine_config().dtype == expected


@pytest.mark.parametrize("capability, expected", [((8, 6), "bfloat16"), ((7, 5), "float16")])
def test_a_default_cuda_worker_computes_by_the_devices_capability_read_where_the_engine_is(monkeypatch, capability,
                                                                                          expected):
    import poolq.engine.device.hardware as hardware
    from poolq.engine import ModelRegistry
    from poolq.jobs.engine_pool import EnginePool
    from poolq.jobs.settings import Settings

    monkeypatch.delenv("POOLQ_COMPUTE_DTYPE", raising=False)
    monkeypatch.delenv("POOLQ_DTYPE", raising=False)
    monkeypatch.setattr(hardware, "cuda_device_capability", lambda device: capability)
    settings = Settings(device="cuda:0")
    assert settings.serving.compute_dtype == "auto" and settings.serving.engine_config().dtype == "auto"  # the settings leave it
    engines = EnginePool(ModelRegistry.with_packaged_models(), settings.serving.engine_config())
    assert engines.dtype_for() == expected  # the engine's pool, in the process that loads it, resolves it


def test_settings_on_a_cuda_device_never_ask_torch_cuda(monkeypatch):
    # A Celery worker's parent reads these before it forks: CUDA initialised there is unusable in every child
    import torch

    from poolq.jobs.settings import Settings

    def touched(*args, **kwargs):
        raise AssertionError("torch.cuda was asked from the settings")

    for name in ("get_device_capability", "is_available", "device_count", "init", "_lazy_init"):
        monkeypatch.setattr(torch.cuda, name, touched)
    monkeypatch.delenv("POOLQ_COMPUTE_DTYPE", raising=False)
    monkeypatch.delenv("POOLQ_DTYPE", raising=False)
    settings = Settings(device="cuda")
    assert settings.serving.compute_dtype == "auto" and settings.serving.engine_config().dtype == "auto"
    assert Settings(device="cuda", dtype="float16").serving.engine_config().dtype == "float16"  # a pinned dtype is kept


def test_the_engine_loads_in_auto_unless_told(monkeypatch):
    import torch

    import poolq.engine.device.hardware as hardware
    from poolq.engine import PoolingEngine

    monkeypatch.setattr(hardware, "cpu_flags", lambda text=None: cpu_flags(SAPPHIRE_RAPIDS))
    engine = PoolingEngine.from_pretrained("splade-tiny")  # small: bf16 emulated here is fine for a load
    assert engine.config.dtype == "bfloat16"
    assert {p.dtype for p in engine.runner.encoder.parameters()} == {torch.bfloat16}
    assert PoolingEngine.from_pretrained("splade-tiny", dtype="float32").config.dtype == "float32"
