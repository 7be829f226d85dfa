"""``evaluator doctor``: each check's ok, warning and failed paths with faked probes (the
exact guidance in each failure), the memory arithmetic against hand-computed figures, the
subprocess probe's hang/abort/error handling, and one real run on this machine."""

from __future__ import annotations

import json
import math
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evaluator.cli import doctor_cmd
from evaluator.cli.main import cli
from evaluator.doctor.cuda import JudgeUse, check_gpu, check_torch, check_vllm, runs_on
from evaluator.doctor.diagnose import DoctorOptions, diagnose
from evaluator.doctor.host import check_disk, check_offline
from evaluator.doctor.install import (
    LockError,
    bundle_lock,
    check_packages,
    check_python,
    install_lock,
    read_lock,
)
from evaluator.doctor.judge_files import check_weights
from evaluator.doctor.memory import (
    MemoryEstimate,
    check_memory,
    estimate,
    model_shape,
    weight_bytes,
)
from evaluator.doctor.probes import (
    Gpu,
    ImportProbe,
    Probes,
    SmiInfo,
    parse_smi_cuda_version,
    parse_smi_query,
    run_python_probe,
)
from evaluator.judges.embedded_judge import embedded_judge_dir, embedded_judge_ready
from evaluator.judges.models_file import JudgeSpec
from evaluator.judges.offline import OFFLINE_ENV
from evaluator.judges.weights import make_weight_list, write_weight_list

GiB = 2**30
MiB = 2**20
NO_TORCH = ImportProbe(installed=False)
CPU_TORCH = ImportProbe(installed=True, info={"version": "2.13.0+cpu", "cuda": None,
                                              "available": False, "gpus": [], "warnings": []})
NO_SMI = SmiInfo(found=False)
H100 = Gpu(name="NVIDIA H100 80GB HBM3", total=80 * GiB, free=79 * GiB)


def cuda_torch(build="13.0", gpus=(H100,), warnings=()):
    return ImportProbe(installed=True, info={
        "version": f"2.13.0+cu{build.replace('.', '')}", "cuda": build,
        "available": bool(gpus), "warnings": list(warnings),
        "gpus": [{"name": g.name, "total": g.total, "free": g.free} for g in gpus]})


def smi(*gpus, driver="580.65.06"):
    return SmiInfo(found=True, gpus=tuple(gpus), driver=driver)


def vllm_probe(device="cuda", version="0.32.0"):
    return ImportProbe(installed=True, info={"version": version, "device_type": device,
                                             "gpu_memory_utilization": 0.92})


def fake_probes(**overrides) -> Probes:
    """Probes that touch nothing: a CPU host with no GPU, no vLLM, everything in order."""
    base = Probes(
        python_version=lambda: "3.11.7", prefix=lambda: Path("/nonexistent/venv"),
        installed_version=lambda name: None,
        evaluator_requires=lambda: ['vllm<0.34,>=0.32; extra == "vllm"'],
        nvidia_smi=lambda: NO_SMI, driver_cuda=lambda: None, torch=lambda: CPU_TORCH,
        vllm=lambda: ImportProbe(installed=False), disk_free=lambda path: 100 * GiB,
        writable=lambda path: True, memory_available=lambda: 16 * GiB,
        environ=lambda: dict(OFFLINE_ENV), inherited_env=dict, hub_offline=lambda: None)
    return replace(base, **overrides)


def write_safetensors(path: Path, tensors: dict, with_data: bool = True) -> None:
    """A safetensors file: ``tensors`` is name -> (dtype, shape); the data is zeros, or
    absent (header only: enough for the memory estimate, which reads no weight)."""
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n_bytes = math.prod(shape) * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset,
                                                                              offset + n_bytes]}
        offset += n_bytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + (bytes(offset) if with_data else b""))


QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
            "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "hidden_size": 4096, "max_position_embeddings": 40960,
            "torch_dtype": "bfloat16"}
# Qwen3-8B's 8,190,735,360 parameters as one bf16 tensor (header only).
QWEN3_PARAMS = 8_190_735_360


def qwen_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "qwen3-8b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_8B))
    write_safetensors(folder / "model.safetensors", {"w": ("BF16", [QWEN3_PARAMS])},
                      with_data=False)
    return folder


def vllm_spec(folder: Path, **engine) -> JudgeSpec:
    return JudgeSpec(backend="vllm", path=folder, dtype="bfloat16", max_model_len=16384,
                     batch_size=128, engine=engine)


# ------------------------------------------------------------------ the arithmetic

def test_kv_cache_per_token_of_known_shapes():
    # Qwen3-8B: 2 x 36 layers x 8 KV heads x 128 x 2 bytes = 147,456 B (144 KiB).
    assert model_shape(QWEN3_8B).kv_bytes_per_token(2) == 147_456
    # The default judge (SmolLM2-135M): 2 x 30 x 3 x 64 x 4 bytes (float32) = 46,080 B.
    smollm = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
              "hidden_size": 576, "max_position_embeddings": 8192}
    assert model_shape(smollm).kv_bytes_per_token(4) == 46_080
    # No head_dim, no KV heads: hidden / heads, and every head keeps its K and V.
    assert model_shape({"num_hidden_layers": 2, "num_attention_heads": 4,
                        "hidden_size": 64}).kv_bytes_per_token(2) == 2 * 2 * 4 * 16 * 2
    # A multimodal checkpoint keeps the language model's shape in text_config.
    nested = model_shape({"text_config": QWEN3_8B})
    assert (nested.layers, nested.kv_heads, nested.head_dim) == (36, 8, 128)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        model_shape({"num_attention_heads": 4, "hidden_size": 64})


def test_estimate_of_a_qwen3_8b_vllm_judge(tmp_path):
    folder = qwen_folder(tmp_path)
    est = estimate(vllm_spec(folder), folder, "cuda", H100)
    assert est.weights == QWEN3_PARAMS * 2 == 16_381_470_720            # 15.26 GiB
    assert est.per_sequence == 147_456 * 16384 == 2_415_919_104         # 2.25 GiB
    assert est.sequences == 128     # batch_size; vLLM's default max_num_seqs (1024) is larger
    assert est.total == 16_381_470_720 + 128 * 2_415_919_104
    # 0.92 x 80 GiB = 73.6 GiB: (73.6 - 15.26) / 2.25 = 25.9 -> 25 full-length sequences.
    assert est.fitting(0.92 * 80 * GiB) == 25
    # fp8 KV cache halves it; max_num_seqs caps the sequences; float32 weights as stored.
    fp8 = estimate(vllm_spec(folder, kv_cache_dtype="fp8", max_num_seqs=32), folder, "cuda",
                   H100)
    assert (fp8.per_sequence, fp8.sequences) == (2_415_919_104 // 2, 32)
    # Split over two GPUs: each holds half the weights and half of each sequence.
    split = MemoryEstimate(weights=16 * GiB, kv_per_token=147_456, max_model_len=16384,
                           sequences=1, devices=2)
    assert split.fitting(10 * GiB) == math.floor((10 - 8) / 1.125)


def test_weight_bytes_follow_the_load_dtype(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", {"w": ("F32", [10, 10]),
                                                   "q": ("I32", [5])}, with_data=False)
    assert weight_bytes(tmp_path, None) == 400 + 20          # as stored
    assert weight_bytes(tmp_path, 2) == 200 + 20             # floats in 16 bits, ints as stored
    (tmp_path / "b.safetensors").write_bytes(b"not a safetensors file")
    assert weight_bytes(tmp_path, None) == 420 + 22          # unreadable: its size on disk


@pytest.mark.skipif(not embedded_judge_ready(), reason="the default judge is not prepared "
                    "(make judge)")
def test_estimate_of_the_default_judge_matches_its_shape_by_hand():
    spec = JudgeSpec(backend="transformers", embedded="smollm2-135m-instruct",
                     dtype="float32", device="cpu", max_model_len=8192, batch_size=1)
    est = estimate(spec, embedded_judge_dir(), "cpu", None)
    # 49,152 x 576 tied embeddings + 30 layers x 3,540,096 + a 576 norm = 134,515,008
    # parameters, 4 bytes each.
    assert est.weights == 134_515_008 * 4
    assert est.per_sequence == 46_080 * 8192 == 377_487_360


# ------------------------------------------------------------------ memory check

def test_memory_ok_when_the_weights_and_some_sequences_fit(tmp_path):
    folder = qwen_folder(tmp_path)
    check = check_memory(JudgeUse("q", "vllm", "auto"), vllm_spec(folder), folder, "cuda",
                         (H100,), None, 0.92)
    assert check.status == "ok"
    assert "holds the weights and 25 (vLLM schedules what fits" in check.message
    assert check.data["full_length_sequences_fitting"] == 25


def test_memory_fails_when_the_weights_alone_do_not_fit(tmp_path):
    folder = qwen_folder(tmp_path)
    small = Gpu(name="NVIDIA T4", total=16 * GiB, free=16 * GiB)
    check = check_memory(JudgeUse("q", "vllm", "auto"), vllm_spec(folder), folder, "cuda",
                         (small,), None, 0.92)
    assert check.status == "failed"
    assert check.message == (
        "the weights (15.3 GiB) do not fit in vLLM's budget (0.92, its default) x 16.0 GiB "
        "= 14.7 GiB: use a quantized checkpoint (quantization), tensor_parallel_size 2 or a "
        "bigger GPU")


def test_memory_warns_when_not_one_full_length_sequence_fits_beside_the_weights(tmp_path):
    folder = qwen_folder(tmp_path)
    gpu = Gpu(name="NVIDIA A10G", total=18 * GiB, free=18 * GiB)
    check = check_memory(JudgeUse("q", "vllm", "auto"), vllm_spec(folder), folder, "cuda",
                         (gpu,), None, 0.92)
    assert check.status == "warning"
    assert "holds the weights but not one full-length sequence beside them, and vLLM will " \
           "not start then: lower max_model_len, set kv_cache_dtype: fp8, or use a bigger " \
           "GPU" in check.message


def test_memory_fails_when_too_little_is_free_for_vllms_share(tmp_path):
    folder = qwen_folder(tmp_path)
    busy = Gpu(name="NVIDIA H100", total=80 * GiB, free=40 * GiB)
    check = check_memory(JudgeUse("q", "vllm", "auto"), vllm_spec(folder), folder, "cuda",
                         (busy,), None, 0.92)
    assert check.status == "failed"
    assert check.message == (
        "GPU 0 has 40.0 GiB free of 80.0 GiB; vLLM starts only when gpu_memory_utilization "
        "(0.92) x 80.0 GiB = 73.6 GiB is free: stop what else uses the GPU (nvidia-smi lists "
        "it), or set engine: {gpu_memory_utilization: 0.48}")


def test_memory_of_a_transformers_judge_on_the_gpu_counts_the_whole_batch(tmp_path):
    folder = qwen_folder(tmp_path)
    spec = JudgeSpec(backend="transformers", path=folder, dtype="bfloat16", device="cuda",
                     max_model_len=16384, batch_size=32)
    check = check_memory(JudgeUse("q", "transformers", "cuda"), spec, folder, "cuda", (H100,),
                         None, None)
    assert check.status == "warning"  # 15.3 + 32 x 2.25 = 87.3 GiB > 79 GiB free
    assert "lower batch_size or max_model_len, or use backend vllm" in check.message


def test_memory_of_a_cpu_judge_and_too_few_gpus(tmp_path):
    folder = qwen_folder(tmp_path)
    spec = JudgeSpec(backend="transformers", path=folder, device="cpu", max_model_len=4096,
                     batch_size=1)
    check = check_memory(JudgeUse("q", "transformers", "cpu"), spec, folder, "cpu", (), 8 * GiB,
                         None)
    assert check.status == "failed"  # float32 on the CPU: 30.5 GiB of weights
    assert "the weights alone do not fit; free memory or use a smaller judge" in check.message
    two = vllm_spec(folder, tensor_parallel_size=2)
    check = check_memory(JudgeUse("q", "vllm", "auto"), two, folder, "cuda", (H100,), None, 0.92)
    assert check.status == "failed"
    assert "lower tensor_parallel_size or set CUDA_VISIBLE_DEVICES" in check.message


# ------------------------------------------------------------------ torch and the driver

def test_cuda_13_torch_on_a_cuda_12_driver_is_a_failure_saying_what_to_install():
    use = JudgeUse("q", "vllm", "auto")
    check = check_torch(cuda_torch("13.0"), "12.4", smi(H100, driver="550.54.15"), use, "cuda")
    assert check.status == "failed"
    assert check.message == (
        "torch 2.13.0+cu130 is built for CUDA 13.0, but the NVIDIA driver 550.54.15 supports "
        "CUDA up to 12.4: install a driver for CUDA 13 (580 or later), or a torch built for "
        "CUDA 12 (a bundle built from a lock that pins one)")


def test_cuda_12_wheels_on_a_driver_that_supports_11_is_a_failure():
    check = check_torch(cuda_torch("12.8"), "11.4", smi(H100, driver="470.82.01"),
                        JudgeUse("q", "transformers", "cuda"), "cuda")
    assert check.status == "failed"
    assert check.message.startswith(
        "torch 2.13.0+cu128 is built for CUDA 12.8, but the NVIDIA driver 470.82.01 supports "
        "CUDA up to 11.4: install a driver for CUDA 12 (525 or later), or a torch built for "
        "CUDA 11")


def test_torch_against_the_driver_within_one_cuda_major_version():
    use = JudgeUse("q", "vllm", "auto")
    newer_build = check_torch(cuda_torch("12.8"), "12.4", smi(H100), use, "cuda")
    assert newer_build.status == "warning" and "minor-version compatibility" in newer_build.message
    fine = check_torch(cuda_torch("12.4"), "12.8", smi(H100), use, "cuda")
    assert fine.status == "ok"
    assert fine.message == ("torch 2.13.0+cu124 (CUDA 12.4); the NVIDIA driver 580.65.06 "
                            "supports CUDA 12.8")


def test_a_cpu_torch_where_cuda_is_needed_and_a_missing_torch():
    check = check_torch(CPU_TORCH, None, NO_SMI, JudgeUse("q", "vllm", "cuda"), "cuda")
    assert check.status == "failed"
    assert "is a CPU build, and the judge q (vllm, device cuda) needs CUDA: install the GPU " \
           "bundle (locks/gpu.txt)" in check.message
    on_gpu_host = check_torch(CPU_TORCH, None, smi(H100), JudgeUse("t", "transformers", "auto"),
                              "cpu")
    assert on_gpu_host.status == "warning" and "runs on the CPU" in on_gpu_host.message
    missing = check_torch(NO_TORCH, None, NO_SMI, JudgeUse("t", "transformers", "cpu"), "cpu")
    assert missing.status == "failed" and "torch is not installed" in missing.message
    assert check_torch(NO_TORCH, None, NO_SMI, JudgeUse("f", "fake", "auto"), None).status == "ok"
    broken = ImportProbe(installed=True, error="ImportError: libcudart.so.13: cannot open "
                                               "shared object file")
    check = check_torch(broken, None, NO_SMI, JudgeUse("t", "transformers", "cpu"), "cpu")
    assert check.status == "failed" and "import torch failed (ImportError: libcudart" \
        in check.message


# ------------------------------------------------------------------ GPUs

def test_no_gpu_is_a_warning_for_a_cpu_judge_and_a_failure_for_a_cuda_one():
    cpu = check_gpu(NO_SMI, CPU_TORCH, JudgeUse("d", "transformers", "cpu"), "cpu", {})
    assert cpu.status == "warning"
    assert cpu.message == ("no GPU: nvidia-smi is not installed and torch sees no CUDA device; "
                           "the judge runs on the CPU")
    cuda = check_gpu(NO_SMI, CPU_TORCH, JudgeUse("q", "vllm", "cuda"), "cuda", {})
    assert cuda.status == "failed"
    assert cuda.message == ("no GPU: nvidia-smi is not installed and torch sees no CUDA "
                            "device; the judge q (vllm, device cuda) needs one: run it on a GPU "
                            "host, or set device: cpu")


def test_gpus_listed_hidden_or_behind_a_broken_driver():
    use = JudgeUse("q", "vllm", "auto")
    listed = check_gpu(smi(H100), cuda_torch(), use, "cuda", {})
    assert listed.status == "ok"
    assert listed.message == ("1 GPU: 0: NVIDIA H100 80GB HBM3, 79.0 GiB free of 80.0 GiB "
                              "(driver 580.65.06)")
    hidden = check_gpu(smi(H100), cuda_torch(gpus=()), use, "cuda",
                       {"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.status == "failed" and "CUDA_VISIBLE_DEVICES='' hides them" in hidden.message
    old = check_gpu(smi(H100), cuda_torch(gpus=(), warnings=["CUDA initialization: The NVIDIA "
                    "driver on your system is too old (found version 11040)."]), use, "cuda", {})
    assert old.status == "failed" and "driver on your system is too old" in old.message
    mismatch = check_gpu(SmiInfo(found=True, error="Failed to initialize NVML: Driver/library "
                                 "version mismatch"), CPU_TORCH, use, "cuda", {})
    assert mismatch.status == "failed"
    assert "reboot (or reload the nvidia kernel module) after a driver update" in mismatch.message


def test_where_a_judge_runs():
    gpu_torch = cuda_torch()
    assert runs_on(JudgeUse("t", "transformers", "auto"), gpu_torch, NO_TORCH) == "cuda"
    assert runs_on(JudgeUse("t", "transformers", "auto"), CPU_TORCH, NO_TORCH) == "cpu"
    assert runs_on(JudgeUse("v", "vllm", "auto"), CPU_TORCH, vllm_probe("cpu")) == "cpu"
    assert runs_on(JudgeUse("v", "vllm", "auto"), CPU_TORCH, NO_TORCH) == "cuda"
    assert runs_on(JudgeUse("f", "fake", "auto"), CPU_TORCH, NO_TORCH) is None


# ------------------------------------------------------------------ vLLM

REQUIRES = ['vllm<0.34,>=0.32; extra == "vllm"']


def test_vllm_import_failing_fails_a_vllm_judge_and_warns_otherwise():
    broken = ImportProbe(installed=True, error="the import did not finish in 180 s")
    check = check_vllm(broken, JudgeUse("q", "vllm", "auto"), "cuda", REQUIRES)
    assert check.status == "failed"
    assert check.message == ("import vllm failed (the import did not finish in 180 s): run "
                             "`python -c 'import vllm'` to see the whole error; check torch "
                             "and gpu above")
    assert check_vllm(broken, JudgeUse("t", "transformers", "cpu"), "cpu",
                      REQUIRES).status == "warning"
    missing = check_vllm(ImportProbe(installed=False), JudgeUse("q", "vllm", "auto"), "cuda",
                         REQUIRES)
    assert missing.status == "failed" and "vLLM is not installed" in missing.message


def test_vllm_platform_and_version_range():
    use = JudgeUse("q", "vllm", "cuda")
    assert check_vllm(vllm_probe("cuda"), use, "cuda", REQUIRES).message == \
        "vLLM 0.32.0, platform cuda"
    cpu_build = check_vllm(vllm_probe("cpu"), use, "cuda", REQUIRES)
    assert cpu_build.status == "failed" and "install vLLM's CUDA build" in cpu_build.message
    no_platform = check_vllm(vllm_probe(""), JudgeUse("q", "vllm", "auto"), "cuda", REQUIRES)
    assert no_platform.status == "failed" and "found no platform" in no_platform.message
    newer = check_vllm(vllm_probe(version="0.35.1"), use, "cuda", REQUIRES)
    assert newer.status == "failed" and "outside the supported range" in newer.message


# ------------------------------------------------------------------ packages and Python

LOCK = """\
# This file was autogenerated by uv
foo==1.0 \\
    --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000
    # via evaluator (pyproject.toml)
torch==2.13.0 \\
    --hash=sha256:1111111111111111111111111111111111111111111111111111111111111111
gone==3.0 \\
    --hash=sha256:2222222222222222222222222222222222222222222222222222222222222222
winonly==1.0 ; sys_platform == "win32" \\
    --hash=sha256:3333333333333333333333333333333333333333333333333333333333333333
"""


def test_packages_against_the_lock(tmp_path):
    lock = tmp_path / "requirements.txt"
    lock.write_text(LOCK)
    installed = {"foo": "1.1", "torch": "2.13.0+cpu"}.get
    check = check_packages(read_lock(lock), lock, installed)
    assert check.status == "failed"
    assert check.message == (
        f"2 of 3 packages differ from {lock}: foo 1.1 (lock ==1.0), gone missing. Something "
        "was installed over the lock: reinstall (a bundle: install.sh into a new prefix; a "
        "checkout: make install)")
    assert check_packages(read_lock(lock), lock, {"foo": "1.0", "torch": "2.13.0+cpu",
                                                  "gone": "3.0"}.get).status == "ok"
    skipped = check_packages(None, None, installed, "not checked: no lock")
    assert skipped.status == "warning"


def test_an_unreadable_lock_is_a_user_error_and_the_bundle_lock_is_found(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not a requirement!\n")
    with pytest.raises(LockError, match="line 1: not a requirement"):
        read_lock(bad)
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "requirements.txt").write_text(LOCK)
    (tmp_path / "bundle" / "BUNDLE.json").write_text('{"python": "3.12"}')
    lock = bundle_lock(tmp_path / "venv")
    assert lock == tmp_path / "bundle" / "requirements.txt"
    check = check_python("3.11.7", lock)
    assert check.status == "failed"
    assert check.message == ("Python 3.11.7, but the bundle's wheels are for Python 3.12: "
                             "install the bundle again with --python python3.12")
    assert check_python("3.12.1", lock).status == "ok"


def test_the_lock_make_install_left_in_the_venv_is_checked_without_lock(tmp_path):
    """A checkout's venv holds the copy of locks/cpu.txt that make install installed
    (evaluator-lock.txt): doctor compares with it when no --lock is given; a bundle's own
    lock comes first."""
    venv = tmp_path / "venv"
    venv.mkdir()
    assert install_lock(venv) is None
    (venv / "evaluator-lock.txt").write_text(LOCK)
    assert install_lock(venv) == venv / "evaluator-lock.txt"
    installed = {"foo": "1.0", "torch": "2.13.0+cpu", "gone": "3.0"}
    spec = vllm_spec(tmp_path)
    report = diagnose("q", spec, DoctorOptions(output_dir=tmp_path), fake_probes(
        prefix=lambda: venv, installed_version=installed.get))
    packages = next(c for c in report.checks if c.name == "packages")
    assert packages.status == "ok" and str(venv / "evaluator-lock.txt") in packages.message
    without = diagnose("q", spec, DoctorOptions(output_dir=tmp_path), fake_probes(
        prefix=lambda: tmp_path / "other", installed_version=installed.get))
    assert next(c for c in without.checks if c.name == "packages").message == (
        "not checked: installed neither from a bundle nor by make install; give the lock it "
        "was installed from with --lock FILE")
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "requirements.txt").write_text(LOCK)
    assert install_lock(venv) == tmp_path / "bundle" / "requirements.txt"


def test_the_makefile_leaves_the_lock_it_installed_in_the_venv():
    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    assert "cp locks/cpu.txt $(VENV)/evaluator-lock.txt" in makefile


def test_the_real_cpu_lock_parses():
    names = {r.name for r in read_lock(Path(__file__).parents[1] / "locks" / "cpu.txt")}
    assert {"torch", "transformers", "llguidance", "packaging"} <= names


# ------------------------------------------------------------------ weights

def small_judge(tmp_path: Path, listed: bool = True) -> Path:
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    write_safetensors(folder / "model.safetensors", {"w": ("F32", [256])})
    if listed:
        write_weight_list(folder, make_weight_list(folder, "j"))
    return folder


def test_weights_against_their_list(tmp_path):
    folder = small_judge(tmp_path)
    spec = JudgeSpec(backend="transformers", path=folder)
    use = JudgeUse("j", "transformers", "auto")
    assert check_weights(use, spec, folder, None).status == "ok"
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    check = check_weights(use, spec, folder, None)
    assert check.status == "failed"
    assert check.message == (
        f"{folder} does not match its evaluator-weights.json: model.safetensors: SHA-256 "
        "differs from evaluator-weights.json. Copy the judge's folder again from its bundle, "
        "then evaluator models --verify j")
    # --quick compares names and sizes only: a flipped byte passes, a missing file does not.
    assert check_weights(use, spec, folder, None, rehash=False).status == "ok"
    (folder / "model.safetensors").unlink()
    assert check_weights(use, spec, folder, None, rehash=False).status == "failed"


def test_weights_without_a_list_or_a_folder(tmp_path):
    folder = small_judge(tmp_path, listed=False)
    use = JudgeUse("j", "transformers", "auto")
    spec = JudgeSpec(backend="transformers", path=folder)
    check = check_weights(use, spec, folder, None)
    assert check.status == "warning" and "no weight list (evaluator-weights.json)" in check.message
    assert check.message.endswith("a judge from a bundle has one (docs/airgapped.md)")
    # The default judge, prepared before preparing wrote a list: preparing again makes one.
    embedded = JudgeSpec(backend="transformers", embedded="smollm2-135m-instruct")
    check = check_weights(use, embedded, folder, None)
    assert check.status == "warning" and check.message.endswith(
        "the default judge gets one when prepared: evaluator prepare-judge --force")
    missing = tmp_path / "nowhere"
    check = check_weights(use, JudgeSpec(backend="transformers", path=missing), missing, None)
    assert check.status == "failed" and "does not exist" in check.message
    check = check_weights(JudgeUse("d", "transformers", "cpu"), spec, None, "not prepared")
    assert check.message == ("the default judge d is not prepared: run evaluator "
                             "prepare-judge (make judge)")


# ------------------------------------------------------------------ disk and offline

def test_low_disk_and_an_unwritable_output_folder(tmp_path):
    low = check_disk(tmp_path / "out" / "new", lambda p: 300 * MiB, lambda p: True)
    assert low.status == "warning"
    assert low.message == (f"only 300 MiB free in {tmp_path}: free some space or write "
                           "outputs elsewhere (--output-dir here, --output for the run)")
    locked = check_disk(tmp_path, lambda p: 100 * GiB, lambda p: False)
    assert locked.status == "failed" and f"cannot write in {tmp_path}" in locked.message
    assert check_disk(tmp_path, lambda p: 100 * GiB, lambda p: True).status == "ok"
    # A folder that does not exist yet: the one it would be made in, and said so.
    later = check_disk(tmp_path / "new", lambda p: 100 * GiB, lambda p: True)
    assert later.status == "ok" and later.message == (
        f"100.0 GiB free in {tmp_path} ({tmp_path / 'new'} does not exist yet: it would be "
        "made there)")


def test_the_current_folder_is_not_said_to_be_missing(tmp_path, monkeypatch):
    # `.` (the default --output-dir) and other relative folders that exist: said as they are.
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    for given in (Path("."), Path("out")):
        check = check_disk(given, lambda p: 100 * GiB, lambda p: True)
        assert check.status == "ok"
        assert check.message == f"100.0 GiB free in {Path.cwd() / given}", given
    # A relative folder not made yet is still said to be.
    later = check_disk(Path("new"), lambda p: 100 * GiB, lambda p: True)
    assert later.message == (f"100.0 GiB free in {Path.cwd()} (new does not exist yet: it "
                             "would be made there)")


def test_an_overridden_offline_switch_is_a_warning_and_a_missing_one_a_failure():
    check = check_offline(dict(OFFLINE_ENV), {"HF_HUB_OFFLINE": "0", "DO_NOT_TRACK": None},
                          True)
    assert check.status == "warning"
    assert check.message == ("your environment sets HF_HUB_OFFLINE=0; evaluator forces "
                             "HF_HUB_OFFLINE=1, but other tools on this host inherit yours: "
                             "unset them (e.g. in ~/.bashrc)")
    # The same meaning in other words is no override.
    assert check_offline(dict(OFFLINE_ENV), {"HF_HUB_OFFLINE": "true", "DO_NOT_TRACK": "1",
                                             "TOKENIZERS_PARALLELISM": "0"}, None).status == "ok"
    unset = {k: v for k, v in OFFLINE_ENV.items() if k != "HF_HUB_OFFLINE"}
    check = check_offline(unset, {}, None)
    assert check.status == "failed"
    assert check.message.startswith("1 offline switches are not in force here (HF_HUB_OFFLINE "
                                    "unset): call evaluator.judges.offline.force_offline()")
    stale = check_offline(dict(OFFLINE_ENV), {}, False)
    assert stale.status == "failed" and "huggingface_hub was imported before" in stale.message
    assert check_offline(dict(OFFLINE_ENV), {}, None).status == "ok"


# ------------------------------------------------------------------ probes

def test_nvidia_smi_output_is_parsed():
    gpus, driver = parse_smi_query("550.54.15, NVIDIA A100-SXM4-80GB, 81920, 81037\n"
                                   "550.54.15, NVIDIA A100-SXM4-80GB, 81920, [N/A]\n")
    assert driver == "550.54.15"
    assert gpus[0] == Gpu(name="NVIDIA A100-SXM4-80GB", total=81920 * MiB, free=81037 * MiB)
    assert gpus[1].free == 0
    header = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4     |"
    assert parse_smi_cuda_version(header) == "12.4"
    assert parse_smi_cuda_version("garbage") is None


def test_the_subprocess_probe_survives_hangs_aborts_and_import_errors():
    assert run_python_probe("print(MARK + '{\"a\": 1}')").info == {"a": 1}
    hang = run_python_probe("import time; time.sleep(60)", timeout=1)
    assert hang.error == "the import did not finish in 1 s"
    abort = run_python_probe("import os; os.abort()")
    assert abort.error == "the process was killed by SIGABRT"
    missing = run_python_probe("import no_such_module_here")
    assert missing.error == "ModuleNotFoundError: No module named 'no_such_module_here'"


# ------------------------------------------------------------------ diagnose and the CLI

def test_diagnose_a_vllm_judge_on_a_healthy_gpu_host(tmp_path):
    folder = qwen_folder(tmp_path)
    probes = fake_probes(nvidia_smi=lambda: smi(H100), driver_cuda=lambda: "13.0",
                         torch=lambda: cuda_torch(), vllm=lambda: vllm_probe("cuda"))
    report = diagnose("q", vllm_spec(folder), DoctorOptions(output_dir=tmp_path), probes)
    statuses = {c.name: c.status for c in report.checks}
    assert list(statuses) == ["python", "packages", "torch", "gpu", "vllm", "weights",
                              "memory", "disk", "offline"]
    assert statuses["torch"] == statuses["gpu"] == statuses["vllm"] == "ok"
    assert statuses["memory"] == "ok"
    # The header-only safetensors file is not a loadable folder: the run's own check says so.
    assert statuses["weights"] == "failed"


def _models_file(tmp_path: Path, judges: dict) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"default": next(iter(judges)), "judges": judges}))
    return path


def test_user_errors_are_one_line_and_exit_2(tmp_path):
    models = _models_file(tmp_path, {"f": {"backend": "fake"}})
    result = CliRunner().invoke(cli, ["doctor", "--models-file", str(models), "--model", "nope"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: unknown judge 'nope'; models.yaml defines: f"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("default: x\njudges: {x: {backend: transformers, temprature: 1}}\n")
    result = CliRunner().invoke(cli, ["doctor", "--models-file", str(bad)])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    lock = tmp_path / "lock.txt"
    lock.write_text("not a requirement!\n")
    result = CliRunner().invoke(cli, ["doctor", "--models-file", str(models), "--lock",
                                      str(lock)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --lock {lock} line 1: not a requirement"


def test_a_failed_check_exits_1_and_json_lists_every_check(tmp_path, monkeypatch):
    folder = qwen_folder(tmp_path)
    models = _models_file(tmp_path, {"q": {"backend": "vllm", "path": str(folder),
                                           "device": "cuda"}})
    real = doctor_cmd.diagnose
    monkeypatch.setattr(doctor_cmd, "diagnose",
                        lambda *a, **k: real(*a, probes=fake_probes(), **k))
    result = CliRunner().invoke(cli, ["doctor", "--models-file", str(models), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["format"] == "evaluator-doctor/1" and report["status"] == "failed"
    gpu = next(c for c in report["checks"] if c["name"] == "gpu")
    assert gpu["status"] == "failed" and gpu["message"].startswith("no GPU: ")
    text = CliRunner().invoke(cli, ["doctor", "--models-file", str(models)])
    assert text.exit_code == 1
    assert all(len(line) <= 80 for line in text.stdout.splitlines())
    assert text.stdout.splitlines()[-1].startswith("4 failed, ")


@pytest.mark.skipif(not embedded_judge_ready(), reason="the default judge is not prepared "
                    "(make judge)")
def test_a_real_run_on_this_machine_reports_no_gpu_cleanly(tmp_path):
    """`evaluator doctor` as a user runs it: a fresh process (in this one, other tests
    have long imported huggingface_hub, which the offline check rightly reports)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "evaluator", "doctor", "--output-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=600,
                            check=False)
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    checks = [line.split()[1] for line in lines if line.split()[0] in ("ok", "warning",
                                                                        "failed")]
    assert checks == ["python", "packages", "torch", "gpu", "vllm", "weights", "memory",
                      "disk", "offline"]
    if shutil.which("nvidia-smi") is None:
        gpu = next(line for line in lines if line.split()[1:2] == ["gpu"])
        assert gpu.startswith("warning gpu       no GPU: nvidia-smi is not installed")
    # The default judge runs on the CPU: no GPU is a warning, and nothing else fails here.
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_verdict_line_counts_warnings_in_words():
    from evaluator.cli.doctor_cmd import format_report
    from evaluator.doctor.report import DoctorReport, failed, ok, warning

    def last(*checks):
        return format_report(DoctorReport.of("j", "transformers", list(checks))).splitlines()[-1]

    assert last(ok("a", "x")) == "0 failed, 0 warnings: nothing stops the judge from starting"
    assert last(ok("a", "x"), warning("b", "y")) == (
        "0 failed, 1 warning: nothing stops the judge from starting")
    assert last(warning("a", "x"), warning("b", "y"), failed("c", "z")) == (
        "1 failed, 2 warnings: some checks failed: fix those first")
