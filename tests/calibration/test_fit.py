"""The performance model's constants: how they are read and how the fit weighs sources."""

import pytest
from pydantic import ValidationError

from llmfleet.calibration.fit import source_weights
from llmfleet.calibration.rows import RowPrediction
from llmfleet.catalog import constants


def test_an_unknown_key_in_the_constants_is_refused_by_name():
    doc = constants.document()
    doc["memory"]["sampler_logit_copys"] = {"value": 9.7, "prior": 9.7, "reason": "typo"}
    with pytest.raises(ValidationError, match=r"sampler_logit_copys\n  Extra inputs are not"):
        constants.parse(doc)


def test_every_source_weighs_the_same_in_the_fit():
    points = [RowPrediction(str(i), "BIG", "vllm", "itl_ms", 1.0, 1.0) for i in range(90)]
    points += [RowPrediction(str(i), "SMALL", "vllm", "itl_ms", 1.0, 1.0) for i in range(10)]
    w = source_weights(points)
    # mean 50 points per source: 90 x (50/90) = 10 x (50/10) = 50 squared weight each
    assert w["BIG"] == pytest.approx((50 / 90) ** 0.5)
    assert 90 * w["BIG"] ** 2 == pytest.approx(10 * w["SMALL"] ** 2)
