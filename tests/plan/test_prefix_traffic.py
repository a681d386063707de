"""traffic.shared_prefix_tokens, traffic.turns, traffic.think_time_s and edge.balancing:
defaults change nothing, and each bad value is an error naming the field, the value and
what would work."""

import pytest
from plans import ONE_REGION, make_plan, plan_dict

from llmfleet.errors import PlanError, StackError
from llmfleet.plan.checks import check_production
from llmfleet.plan.stacks import parse_plan


def test_the_defaults_are_one_turn_no_shared_prefix_and_the_albs_balancing():
    plan = make_plan()
    assert (plan.traffic.shared_prefix_tokens, plan.traffic.turns) == (0, 1)
    assert plan.edge.balancing == "least_outstanding"


def test_a_shared_prefix_as_long_as_the_mean_prompt_names_the_longest_that_fits():
    # BASE's mean prompt is 1000 tokens: a 1000-token shared prefix leaves no own tokens.
    with pytest.raises(StackError, match=r"traffic.shared_prefix_tokens \(1000\) is not below "
                       r"input_tokens.mean \(1000\).*give at most 999"):
        make_plan(**{"traffic.shared_prefix_tokens": 1000})


def test_turns_that_cannot_fit_the_mean_prompt_give_the_most_that_fit():
    # 1000-token mean prompt, 250-token answers, a 400-token shared prefix: with T turns the
    # mean turn index is (T + 1) / 2, so 5 turns need 400 + 2 x 250 = 900 tokens before the
    # 3 new-message shares (u = 100 / 3 = 33 tokens each: fits); 7 turns need
    # 400 + 3 x 250 = 1150 > 1000. The most that fit: u = 1 needs a mean turn index of
    # (1000 - 400 + 250) / 251 = 3.386, which 5- and 6-turn conversations mixed 26:74 have
    # (30 + 12 w) / (10 + 2 w) at w = 0.738: T = 5.73.
    make_plan(**{"traffic.shared_prefix_tokens": 400, "traffic.turns": 5})
    with pytest.raises(StackError, match=r"traffic.turns \(7\) does not fit input_tokens.mean "
                       r"\(1000\).*more than 1,150 tokens; give turns of at most 5.73"):
        make_plan(**{"traffic.shared_prefix_tokens": 400, "traffic.turns": 7})


def test_turns_below_one_are_refused_by_field():
    with pytest.raises(StackError, match=r"plan.traffic.turns = 0.5: Input should be greater "
                       "than or equal to 1"):
        make_plan(**{"traffic.turns": 0.5})


def test_a_think_time_without_conversations_is_refused():
    with pytest.raises(StackError, match=r"traffic.think_time_s \(30\) is the time between a "
                       r"conversation's turns, and traffic.turns is 1"):
        make_plan(**{"traffic.think_time_s": 30})
    assert make_plan(**{"traffic.think_time_s": 30, "traffic.turns": 2}).traffic.think_time_s \
        == 30


def test_prefix_aware_balancing_needs_the_entry_point_dns_creates():
    plan = make_plan(**{"edge.balancing": "prefix_aware"})
    with pytest.raises(PlanError, match=r"edge.balancing = 'prefix_aware': the cache-aware "
                       r"router sits behind .* give dns, or use least_outstanding"):
        check_production(plan)
    check_production(parse_plan({**ONE_REGION, "edge": {"balancing": "prefix_aware"}}))


def test_an_unknown_balancing_lists_the_choices():
    with pytest.raises(StackError, match=r"plan.edge.balancing = 'round_robin': Input should "
                       r"be 'least_outstanding' or 'prefix_aware'"):
        parse_plan(plan_dict(**{"edge.balancing": "round_robin"}))
