"""The control loops with the FleetPlan's parameters: the HPA reading KEDA's triggers,
Karpenter's nodes and a new replica's cold start."""

import pytest

from llmfleet.simulate.control import RegionControl


@pytest.fixture
def eu(own_plans):
    """The three-regions plan's eu-north-1: replicas 2-10, two per p5.48xlarge node (TP 4),
    floor 1 node, ceiling 5 (prod's 2-8 on p5en.48xlarge, ceiling 4, before #28)."""
    return own_plans["three-regions"].region("eu-north-1")


def quiet(eu, **signals: float) -> dict[str, float]:
    return {"rate": 0.0, "waiting": 0.0, "kv_usage": 0.0, "queue_wait": 0.0, "ttft": 0.0,
            **signals}


def test_an_average_value_trigger_asks_for_ceil_of_value_over_threshold(eu) -> None:
    rc = RegionControl.start(eu, 0.0, 2)
    threshold = next(t.threshold for t in eu.autoscaling.triggers if t.name == "queue-depth")
    assert threshold == 5
    # 15 requests waiting over 2 replicas: ceil(15 / 5) = 3
    assert rc.desired(0.0, quiet(eu, waiting=15.0)) == 3


def test_within_the_hpas_tolerance_the_count_stays(eu) -> None:
    rc = RegionControl.start(eu, 0.0, 3)
    wait = next(t.threshold for t in eu.autoscaling.triggers if t.name == "queue-wait-mean")
    # 3 replicas at 1.09 x the per-replica threshold: within 10 %, stay at 3 (ceil would be 4)
    assert rc.desired(0.0, quiet(eu, queue_wait=3 * 1.09 * wait)) == 3
    assert rc.desired(15.0, quiet(eu, queue_wait=3 * 1.2 * wait)) == 4


def test_scale_up_is_at_most_double_or_four_more_per_period(eu) -> None:
    # 100 requests waiting ask for ceil(100 / 5) = 20 replicas
    rc = RegionControl.start(eu, 0.0, 8)
    assert rc.desired(0.0, quiet(eu, waiting=100.0)) == 10  # replicas.max (double: 16)
    rc = RegionControl.start(eu, 0.0, 2)
    rc.region = eu.model_copy(update={"replicas": eu.replicas.model_copy(update={"max": 20})})
    assert rc.desired(0.0, quiet(eu, waiting=100.0)) == 6  # 2 + 4


def test_scale_down_waits_out_the_stabilization_window(eu) -> None:
    window = eu.autoscaling.scale_down_stabilization_s  # 600 s
    rc = RegionControl.start(eu, 0.0, 4)
    wait = next(t.threshold for t in eu.autoscaling.triggers if t.name == "queue-wait-mean")
    busy = quiet(eu, queue_wait=4 * wait)
    assert rc.desired(0.0, busy) == 4
    assert rc.desired(15.0, quiet(eu)) == 4  # the 4 of t=0 is still in the window
    assert rc.desired(window, quiet(eu)) == eu.replicas.min


def test_a_replica_on_a_new_node_serves_after_the_whole_cold_start(eu) -> None:
    rc = RegionControl.start(eu, 0.0, 2)  # the floor node full (two replicas)
    rc.poll(0.0, quiet(eu, waiting=15.0))  # ceil(15 / 5) = 3
    cold = eu.cold_start
    new = max(p.serves_at for p in rc.pods)
    # node 410 s + image 180.4 s + container 328.6 s, the probe's next 10 s, the ALB's 2 x 15 s
    probed = -(-cold.container_s // eu.serving.startup_period_s) * eu.serving.startup_period_s
    assert new == pytest.approx(cold.total_s - cold.container_s + probed + 30)
    assert rc.launches == 1 and len(rc.nodes) == 2


def test_an_empty_karpenter_node_goes_after_consolidate_after_and_the_floor_never(eu) -> None:
    rc = RegionControl.start(eu, 0.0, 3)  # the third replica on a Karpenter node
    assert [n.karpenter for n in rc.nodes] == [False, True]
    after = eu.cold_start.consolidate_after_s
    for t in range(0, 4000, 15):
        rc.poll(float(t), quiet(eu))
        if len(rc.nodes) == 1:
            break
    # the pod goes once the 600 s window passes; its node after consolidateAfter (900 s) more
    assert t >= 600 + after - 15
    assert [n.karpenter for n in rc.nodes] == [False]
