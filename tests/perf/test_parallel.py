"""Pipeline stages, data-parallel attention with expert parallelism, and replicas across
nodes: the physics in perf/parallel.py and what `predict` makes of it."""

import math

import pytest

from llmfleet.cli import main
from llmfleet.errors import PlanError
from llmfleet.perf.parallel import (
    all_to_all_s,
    efa_link,
    ep_imbalance,
    hop_s,
    pipeline_cycle_s,
    stage_imbalance,
)
from llmfleet.perf.replica import PredictRequest, run_predict

P5_EFA = efa_link(69.1, 443.7, 50.0)  # catalog efa.csv: p5.48xlarge's two-node nccl-tests


def test_the_slowest_stage_holds_the_rounded_up_share_of_layers():
    # 126 layers in 4 stages: one holds 32, so a cycle runs at 32 x 4 / 126 of the mean
    assert stage_imbalance(126, 4) == pytest.approx(128 / 126)
    assert stage_imbalance(126, 2) == 1.0


def test_a_chunk_stalls_its_microbatch_for_all_of_what_it_adds():
    # the stage-busy bound (30 + 20 / 2 = 40 ms) is below the chunk's own pass (50 ms)
    assert pipeline_cycle_s(0.030, 0.050, 2) == pytest.approx(0.050)


def test_a_pipeline_hop_over_efa_is_its_latency_plus_the_activations_over_a_gpus_share():
    # 32 tokens x 16,384 hidden x 2 tensors x 2 bytes = 2 MiB over 8 ranks at 50 GB/s each
    assert hop_s(32, 16384, 8, P5_EFA) == pytest.approx(69.1e-6 + 2 * 32 * 16384 * 2 / 8 / 50e9)


def test_the_busiest_expert_rank_carries_the_binomial_excess():
    # 64 tokens x top-8 = 512 routings over 8 ranks: 1 + sqrt(2 ln 8 x 7 / 512)
    assert ep_imbalance(512, 8) == pytest.approx(1 + math.sqrt(2 * math.log(8) * 7 / 512))
    assert ep_imbalance(512, 1) == 1.0


def test_a_moe_layer_gathers_and_scatters_the_other_ranks_tokens():
    # EP 16 over EFA: 15/16 of 256 tokens x 7,168 x 2 bytes each way, plus two latencies
    moved = 15 / 16 * 256 * 7168 * 2
    assert all_to_all_s(256, 7168, 16, P5_EFA) == pytest.approx(2 * (69.1e-6 + moved / 50e9))


def test_data_parallel_attention_holds_several_times_the_kv_of_tp_8_for_deepseek():
    # MLA's latent is one KV head: TP 8 replicates it on every GPU, DP 8 keeps each rank's own
    def predict(**kw: object) -> object:
        return run_predict(
            PredictRequest(
                model="DeepSeek-V3", gpu="H200", precision="fp8", input_tokens=1000,
                output_tokens=300, **kw,  # type: ignore[arg-type]
            )
        )

    tp8 = predict(tensor_parallel_size=8)
    dp8 = predict(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    assert (tp8.kv_cache_tokens, dp8.kv_cache_tokens) == (623_440, 3_087_104)
    assert dp8.kv_cache_tokens > 4 * tp8.kv_cache_tokens
    assert dp8.kv_cache_tokens_per_rank == dp8.kv_cache_tokens // 8
    # each rank holds the attention weights whole, the experts an eighth
    assert dp8.weights_gib_per_gpu > tp8.weights_gib_per_gpu
    assert (dp8.gpus, dp8.nodes) == (8, 1)


def test_pipeline_stages_across_two_h100_nodes_hold_the_405b_model():
    def predict(**kw: object) -> object:
        return run_predict(
            PredictRequest(
                model="Llama-3.1-405B-Instruct", gpu="H100", precision="fp8",
                input_tokens=1000, output_tokens=300, concurrency=1, max_model_len=16384,
                **kw,  # type: ignore[arg-type]
            )
        )

    tp8, pp2, tp16 = (
        predict(tensor_parallel_size=8),
        predict(tensor_parallel_size=8, pipeline_parallel_size=2),
        predict(tensor_parallel_size=16),
    )
    assert (pp2.nodes, pp2.gpus, pp2.instance_type) == (2, 16, "p5.48xlarge")
    assert pp2.weights_gib_per_gpu == pytest.approx(tp8.weights_gib_per_gpu / 2, rel=0.02)
    # a lone sequence crosses both stages and two EFA hops: about 2 x 69 us more per token
    assert pp2.itl_ms - tp8.itl_ms == pytest.approx(0.14, abs=0.02)
    # TP across nodes pays EFA's latency in every all-reduce (2 per layer, 126 layers)
    assert tp16.itl_ms > pp2.itl_ms + 5
    # TP 16 replicates the 8 KV heads twice; PP splits the layers: twice the tokens
    assert pp2.kv_cache_tokens == pytest.approx(2 * tp16.kv_cache_tokens, rel=0.01)


@pytest.mark.parametrize(
    ("flags", "field", "says"),
    [
        (["--gpu", "L40S", "--tensor-parallel-size", "16"], "--tensor-parallel-size",
         "no GPUDirect RDMA"),
        (["--gpu", "H100", "--enable-expert-parallel"], "--enable-expert-parallel", "dense"),
        (["--gpu", "H100", "--tensor-parallel-size", "2", "--data-parallel-size", "3"],
         "--data-parallel-size", "DP that would: 1, 2, 4"),
    ],
)
def test_bad_layouts_name_the_flag_and_exit_2(capsys, flags, field, says):
    argv = ["predict", "--model", "Llama-3.1-8B-Instruct", "--input-tokens", "100",
            "--output-tokens", "10", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and says in err


def test_data_parallelism_of_a_moe_model_without_expert_parallelism_is_refused():
    req = PredictRequest(
        model="DeepSeek-V3", gpu="H200", precision="fp8", input_tokens=100, output_tokens=10,
        data_parallel_size=8,
    )
    with pytest.raises(PlanError, match="enable-expert-parallel"):
        run_predict(req)


def test_each_data_parallel_rank_of_a_moe_replica_runs_its_own_max_num_seqs():
    # vLLM's --max-num-seqs is one engine's: TP 4 x DP 2 at 49 a rank decodes 98, beside
    # one prefill chunk (the token budget's 1,073 - 49 = 1,024 tokens)
    r = run_predict(
        PredictRequest(
            model="DeepSeek-V3", gpu="H200", precision="fp8", tensor_parallel_size=4,
            data_parallel_size=2, enable_expert_parallel=True, max_model_len=32768,
            max_num_seqs=49, max_num_batched_tokens=1073, input_tokens=8000,
            output_tokens=1000, concurrency=200,
        )
    )
    assert (r.batch_size, r.saturated, r.max_num_seqs) == (98, True, 49)


def test_data_parallelism_of_a_dense_model_is_independent_engines():
    one = run_predict(
        PredictRequest(model="Llama-3.1-8B-Instruct", gpu="H100", input_tokens=1000,
                       output_tokens=200, concurrency=8)
    )
    eight = run_predict(
        PredictRequest(model="Llama-3.1-8B-Instruct", gpu="H100", input_tokens=1000,
                       output_tokens=200, concurrency=64, data_parallel_size=8)
    )
    assert eight.itl_ms == pytest.approx(one.itl_ms)
    assert eight.output_tokens_per_s == pytest.approx(8 * one.output_tokens_per_s)
    assert eight.kv_cache_tokens == 8 * one.kv_cache_tokens


def test_an_all_reduce_across_two_nodes_reads_the_measured_curve():
    from llmfleet.catalog.network import allreduce_curve
    from llmfleet.perf.parallel import all_reduce_s

    link = efa_link(69.1, 443.7, 50.0, allreduce_curve("p5.48xlarge"))
    assert all_reduce_s(1_048_576, 16, link) == pytest.approx(123.2e-6)  # a measured point
    # between 64 KiB (135.1 us) and 1 MiB (123.2 us): log-log, so 256 KiB lies between
    assert 123.2e-6 < all_reduce_s(262_144, 16, link) < 135.1e-6
    # past 2 GiB (9,074.5 us) at the measured bus bandwidth
    extra = 2 * 15 / 16 * 2**30 / 443.7e9
    assert all_reduce_s(3 * 2**30, 16, link) == pytest.approx(9074.5e-6 + extra)
