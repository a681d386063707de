"""Stage 2's autoscaling section: KEDA triggers whose thresholds are the signals the
performance model predicts at the load where a replica has used up its headroom
(capacity x (1 - headroom)): scale-out starts exactly when the fleet leaves the load it was
sized for, before the SLO is at risk."""

from __future__ import annotations

from llmfleet import fleet
from llmfleet.choice import Choice
from llmfleet.queueing import length_cv2, prefill_wait
from llmfleet.sizing import predict_at, ttft_percentile_s

POLLING_INTERVAL_S = 15
COOLDOWN_PERIOD_S = 300
SCALE_DOWN_STABILIZATION_S = 600
FALLBACK_FAILURE_THRESHOLD = 3


def autoscaling(choice: Choice) -> fleet.Autoscaling:
    """Thresholds are the signals at the load where a replica has used its headroom."""
    plan, sizing, eng = choice.plan, choice.sizing, choice.step_model
    replicas = choice.replicas
    i, o = plan.traffic.input_tokens.mean, plan.traffic.output_tokens.mean
    rate = sizing.capacity_rps * (1 - plan.headroom)
    steps, ttft_s = predict_at(eng, plan, sizing, rate)
    running = rate * o * steps.mean_s
    kv_use = running * (i + o / 2) / sizing.memory.kv_cache_tokens
    service = i / sizing.chunk_tokens * steps.mixed_s
    cv2 = length_cv2(i, plan.traffic.input_tokens.p95_or_mean)
    wait = prefill_wait(steps.mixed_share, service, cv2, plan.slo.percentile)
    queued = rate * wait.mean_s  # Little's law
    limit_ttft = ttft_percentile_s(eng, plan, sizing.steps, sizing.batch, sizing.chunk_tokens)
    p = plan.slo.percentile
    return fleet.Autoscaling(
        polling_interval_s=POLLING_INTERVAL_S,
        cooldown_period_s=COOLDOWN_PERIOD_S,
        scale_down_stabilization_s=SCALE_DOWN_STABILIZATION_S,
        fallback_failure_threshold=FALLBACK_FAILURE_THRESHOLD,
        queue_depth_per_replica=round(max(queued, 0.5), 2),
        kv_cache_usage=round(min(max(kv_use, 0.05), 0.95), 3),
        queue_wait_quantile=round(p / 100, 4),
        queue_wait_s=round(max(wait.percentile_s, 0.01), 3),
        reasons=[
            f"a replica sustains {sizing.capacity_rps:.2f} req/s at the SLO; with "
            f"{plan.headroom:.0%} headroom it is sized for {rate:.2f} req/s",
            f"at {rate:.2f} req/s the model predicts {running:.1f} running sequences "
            f"({kv_use:.0%} of the KV pool), {queued:.2f} queued requests and a p"
            f"{p:g} queue wait of {wait.percentile_s * 1000:.0f} ms (TTFT "
            f"{ttft_s * 1000:.0f} ms; at capacity {limit_ttft * 1000:.0f} ms)",
            "each trigger fires at that value, so scale-out starts when a replica leaves "
            "the load it was sized for, before the headroom is consumed",
            f"min {replicas.min} replicas carry the trough, max {replicas.max} the peak; if "
            f"Prometheus is unreachable KEDA holds {replicas.desired} (the peak size)",
        ],
    )
