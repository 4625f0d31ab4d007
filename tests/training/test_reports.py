"""The memory, parallel-cost and numerics calculators against published reference figures, their
invariants, and the `refinery report` commands."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from training import memory, numerics, parallel
from training.memory import GIB, Shape
from training.model import GPT, MODEL_SIZES, ModelConfig

LLAMA_7B = Shape(7e9, layers=32, hidden=4096, heads=32, seq=4096, micro_batch=1)


def gib(x):
    return round(x / GIB, 1)


def test_model_state_reference_figures():
    assert gib(memory.model_states(6.74e9)["total"]) == 100.4  # 6.74e9 x 16 B
    per_stage = [gib(memory.model_states(7e9, gpus=8, zero=z)["total"]) for z in range(4)]
    assert per_stage == [104.3, 35.9, 24.4, 13.0]  # DDP, ZeRO-1, ZeRO-2, ZeRO-3 on 8 GPUs


def test_activation_reference_figures():
    assert memory.activations(LLAMA_7B, flash=True) / GIB == pytest.approx(17.0, abs=0.05)
    assert memory.activations(LLAMA_7B, flash=True, checkpointing=True) / GIB == pytest.approx(1.5, abs=0.05)
    # without FlashAttention the 5as/h term (scores, softmax, dropout mask) dominates at s=4096
    assert memory.activations(LLAMA_7B, flash=False) / GIB == pytest.approx(97.0, abs=0.05)
    assert memory.recompute_overhead(True) == pytest.approx(1 / 3)


def test_parallel_reference_figures():
    assert parallel.data_parallel_bytes(7e9, 8) / GIB == pytest.approx(22.8, abs=0.05)
    assert parallel.data_parallel_bytes(7e9, 8, zero=1) == parallel.data_parallel_bytes(7e9, 8)
    assert parallel.data_parallel_bytes(7e9, 8, zero=3) / parallel.data_parallel_bytes(7e9, 8) == pytest.approx(1.5)
    tp = parallel.tensor_parallel_bytes(LLAMA_7B)
    assert tp["per_all_reduce"] == 32 * 2**20 and tp["total"] / GIB == pytest.approx(4.0)
    assert round(parallel.transfer_seconds(GIB, 600) * 1e3, 1) == 1.8
    assert parallel.transfer_seconds(GIB, 25) * 1e3 == pytest.approx(43, abs=0.1)
    assert parallel.bubble_fraction(8, 16) == pytest.approx(0.304, abs=5e-4)
    assert parallel.pipeline_activation_micro_batches(8, 16, "1f1b") == 8
    assert parallel.pipeline_activation_micro_batches(8, 16, "gpipe") == 16


def test_invariants():
    zero3 = [memory.model_states(7e9, gpus=n, zero=3)["total"] for n in (1, 2, 4, 8, 16, 64)]
    assert all(z * n == pytest.approx(zero3[0]) for z, n in zip(zero3, (1, 2, 4, 8, 16, 64)))  # falls as 1/N
    bubbles = [parallel.bubble_fraction(8, m) for m in range(1, 2000)]
    assert all(a > b for a, b in zip(bubbles, bubbles[1:])) and bubbles[-1] < 0.004
    for layers, hidden, heads, seq, batch in [(2, 64, 2, 128, 1), (32, 4096, 32, 4096, 1), (80, 8192, 64, 2048, 4),
                                              (12, 768, 12, 1024, 8), (1, 128, 4, 8, 1)]:
        shape = Shape(1e9, layers, hidden, heads, seq, batch)
        for flash in (True, False):
            assert memory.activations(shape, flash, checkpointing=True) <= memory.activations(shape, flash)
    trainable = memory.lora_parameters(32, 4096, 16)
    full = memory.model_states(7e9)["total"]
    assert memory.lora(7e9, trainable, quantized=True)["total"] < memory.lora(7e9, trainable)["total"] < full


def test_shape_of_a_project_model_counts_its_parameters_exactly():
    for name, dims in MODEL_SIZES.items():
        cfg = ModelConfig(vocab_size=258, seq_len=256, **dims)
        assert Shape.from_config(cfg).params == GPT(cfg).num_parameters(), name


def test_layout_planner_keeps_tp_in_a_node_and_refuses_what_cannot_fit():
    seven = parallel.plan_layout(LLAMA_7B, gpus_per_node=8, nodes=1, gpu_gib=80)
    assert seven.tp * seven.pp * seven.dp == 8 and seven.gib_per_gpu <= 72 and seven.reasons
    seventy = parallel.plan_layout(Shape(70e9, 80, 8192, 64, 4096, 1), gpus_per_node=8, nodes=16, gpu_gib=80)
    assert seventy.tp <= 8 and seventy.tp * seventy.pp * seventy.dp == 128 and seventy.gib_per_gpu <= 72
    small_gpus = parallel.plan_layout(LLAMA_7B, gpus_per_node=8, nodes=1, gpu_gib=24)
    assert small_gpus.gib_per_gpu <= 0.9 * 24 and (small_gpus.zero >= 2 or small_gpus.tp * small_gpus.pp > 1)
    with pytest.raises(ValueError, match="no TP x PP x DP layout fits"):
        parallel.plan_layout(Shape(70e9, 80, 8192, 64, 4096, 1), gpus_per_node=8, nodes=1, gpu_gib=80)


def test_number_formats_and_gradient_underflow():
    formats = {f["format"]: f for f in numerics.format_table()}
    assert formats["fp16"]["max"] == 65504 and formats["fp8_e4m3"]["max"] == 448 and formats["fp8_e5m2"]["max"] == 57344
    assert formats["bf16"]["epsilon"] == 2**-7 and formats["fp16"]["smallest_subnormal"] == 2**-24
    under = numerics.gradient_underflow(samples=200_000)
    assert under["fp16_zero_share_scale_1"] > 0.03  # a few % of ~1e-6 gradients vanish in fp16
    assert under["fp16_zero_share_scale_1024"] < 1e-4  # loss scaling brings them back
    assert under["bf16_zero_share_scale_1"] == 0.0  # bf16 has fp32's exponent range
    assert numerics.swamping()["bf16: 1.0 + 1e-3"] == 1.0


def test_minhash_error_follows_the_binomial_prediction_and_the_s_curve_is_a_threshold():
    for row in numerics.minhash_error(ks=(32, 128), jaccards=(0.5,), trials=150):
        assert row["measured_std"] == pytest.approx(row["predicted_std"], rel=0.25)
        assert row["mean_estimate"] == pytest.approx(0.5, abs=0.02)
    curve = {round(c["jaccard"], 2): c["p_candidate"] for c in numerics.lsh_s_curve(14, 8)}
    assert curve[0.5] < 0.06 and curve[0.8] > 0.92


def report(*args):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "report", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_report_commands_print_tables_and_write_json_and_plots(tmp_path):
    out = report("memory", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "4096",
                 "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "ZeRO-3 (FSDP)" in out.stdout and "17.00 GiB" in out.stdout and "1.50 GiB" in out.stdout
    data = json.loads((tmp_path / "memory.json").read_text())
    assert round(data["model_states_gib"]["zero1"]["total"], 1) == 35.9
    out = report("parallel", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "4096",
                 "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "30.4%" in out.stdout and "recommended layout" in out.stdout and "share of *total* step time" in out.stdout
    out = report("numerics", "--trials", "40", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "fp8_e4m3" in out.stdout and "LSH S-curve" in out.stdout
    for png in ("memory_by_zero_stage.png", "bubble.png", "lsh_s_curve.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_plots_of_a_cpu_run_say_cpu_and_no_implausible_plan_is_shown(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    per_rank = {"weights": 499_200, "gradients": 499_200, "optimizer": 998_400}
    (run / "summary.json").write_text(json.dumps({
        "world_size": 2, "device": "cpu", "strategy": "ddp", "parameters": 124_800, "micro_batch": 8,
        "model_config": {"vocab_size": 258, "seq_len": 128, "n_layer": 2, "n_head": 2, "n_embd": 64},
        "measured_vs_predicted": {"recipe": "fp32-adamw", "zero": 0, "predicted": per_rank,
                                  "ranks": [{"measured": per_rank}, {"measured": per_rank}]}}))
    out = report("memory", "--run", str(run), "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "on 2 CPU ranks, fp32-adamw" in out.stdout and "GPU" not in out.stdout.split("\n")[0]
    out = report("parallel", "--run", str(run), "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "2 CPU ranks, 32-bit gradients (fp32-adamw)" in out.stdout
    assert "zero0  487.50 KiB" in out.stdout  # 2·(N-1)/N·4 B·124,800: the bytes the run measured
    assert "layout plan: not shown" in out.stdout and "recommended layout" not in out.stdout
    assert json.loads((tmp_path / "parallel.json").read_text())["plan"]["shown"] is False
    out = report("parallel", "--params", "3e6", "--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "256")
    assert "layout plan: not shown: at 3e+06 parameters" in out.stdout  # tokens/s of a toy model: not plausible


def test_report_help_lists_the_kinds():
    out = report("--help")
    assert out.returncode == 0
    assert all(f"\n  {kind} " in out.stdout for kind in ("memory", "parallel", "numerics", "training"))


def test_report_units_follow_the_magnitude():
    from training.memory import duration, size

    assert [size(x) for x in (512, 499_200, 3 * 2**20, 17 * GIB)] == ["512 B", "487.50 KiB", "3.00 MiB", "17.00 GiB"]
    assert [duration(x) for x in (4.16e-7, 1e-5, 0.0408, 7.0)] == ["416 ns", "10.0 µs", "40.8 ms", "7.0 s"]
