"""The autoscaler's own numbers: a queue-depth threshold a steady load does not cross by
chance, and a scale-down window no shorter than bringing a replica back."""

import pytest

from llmfleet.fleetplan.autoscaling import queue_depth_threshold, stabilization_s


def test_the_queue_depth_threshold_is_crossed_by_chance_about_once_a_day() -> None:
    # Mean 0.5 waiting: q = 0.5 / 1.5 = 1/3; 15 s polls, 5,760 a day: P(N >= k) = (1/3)^k <=
    # 1 / 5,760 at k = ln(5,760) / ln 3 = 7.9 -> 8.
    assert queue_depth_threshold(0.5, 15) == 8
    assert (1 / 3) ** 8 <= 15 / 86_400 < (1 / 3) ** 7
    # Mean 0.1: q = 1/11, k = 8.66 / 2.40 = 3.6 -> 4.
    assert queue_depth_threshold(0.1, 15) == 4


def test_an_idle_queue_still_asks_for_one_waiting_request() -> None:
    assert queue_depth_threshold(0.0, 15) == 1
    assert queue_depth_threshold(1e-9, 15) == 1


@pytest.mark.parametrize(("container_s", "window_s"), [(309.3, 600), (600.0, 600), (601.0, 660),
                                                       (1500.2, 1560)])
def test_scale_down_waits_at_least_a_container_start_rounded_to_a_minute(
    container_s: float, window_s: int
) -> None:
    assert stabilization_s(container_s) == window_s
