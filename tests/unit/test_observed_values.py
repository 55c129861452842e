"""The value a dispatch tells the multiplier estimates (scoring.values_and_observed): a
URL that came due at its last signal counts as if it had reached its threshold ι
at the signal and aged since; any other URL counts at its value now."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler_core.params import UrlParams
from scheduler_core.threshold import threshold_for_value
from scheduler_core.value import crawl_value
from service.scheduler.scoring import values_and_observed, values_of_columns
from service.store.columns import URL_COLUMNS

DAY = 86_400.0
NOW = 1.9e9
W, DELTA, RECALL, NU = 2.0 / DAY, 0.5 / DAY, 0.6, 3.0 / DAY
LAMBDA = 0.8


def _params() -> UrlParams:
    return UrlParams.create(
        weight=[W], change_rate=[DELTA], recall=[RECALL], false_signal_rate=[NU]
    )


def _iota() -> float:
    return float(threshold_for_value(_params(), np.array([LAMBDA]), terms=None)[0])


def _beta() -> float:
    return float(_params().signal_time_equivalent[0])


def _row(last: float, n: int, last_signal: float, beta: float | None = None) -> np.ndarray:
    row = np.zeros(1, dtype=URL_COLUMNS)
    row["weight"], row["change_rate"] = W, DELTA
    row["recall"], row["false_signal_rate"] = RECALL, NU
    row["signal_time_equivalent_s"] = _beta() if beta is None else beta
    row["threshold_s"] = _iota()
    row["scored_lambda"] = LAMBDA
    row["last_crawl_at"], row["last_signal_at"] = last, last_signal
    row["signals_since_crawl"] = n
    return row


def _v(elapsed: float) -> float:
    return float(crawl_value(_params(), np.array([elapsed]), terms=None)[0])


def _observed(row: np.ndarray) -> float:
    values, observed = values_and_observed(row, NOW, None)
    assert values.tolist() == values_of_columns(row, NOW, None).tolist()
    return float(observed[0])


def test_the_world_is_one_where_a_signal_jumps_the_value() -> None:
    iota, beta = _iota(), _beta()
    assert 0 < beta < iota < math.inf
    # the jump a signal gives at ι is far above the threshold: the bias it would add
    assert _v(iota + beta) > 1.05 * LAMBDA


def test_a_url_that_came_due_at_its_signal_counts_from_the_signal() -> None:
    iota, beta = _iota(), _beta()
    waited = 0.1 * DAY
    t_sig = NOW - waited
    last = t_sig - iota + 0.5 * beta  # half a β short of ι when the signal came
    row = _row(last, 1, t_sig)
    now_value = float(values_of_columns(row, NOW, None)[0])
    assert now_value == pytest.approx(_v(NOW - last + beta), rel=1e-12)
    assert _observed(row) == pytest.approx(_v(iota + waited), rel=1e-12)
    assert _observed(row) < now_value


def test_a_url_due_by_time_counts_at_its_value() -> None:
    iota, beta = _iota(), _beta()
    last = NOW - iota - 0.2 * DAY  # due 0.2 days ago with no signal
    row = _row(last, 0, math.nan)
    assert _observed(row) == pytest.approx(_v(NOW - last), rel=1e-12)
    # due by time before its signal came: the signal's jump is not what made it due
    row = _row(last, 1, NOW - 0.1 * DAY)
    assert _observed(row) == pytest.approx(_v(NOW - last + beta), rel=1e-12)


def test_a_url_not_yet_due_counts_below_threshold() -> None:
    iota, beta = _iota(), _beta()
    last = NOW - iota + 3.0 * beta  # three β short even with its one signal
    row = _row(last, 1, NOW - 60.0)
    assert _observed(row) == pytest.approx(_v(NOW - last + beta), rel=1e-12)
    assert _observed(row) < LAMBDA


def test_the_second_of_two_signals_that_made_it_due() -> None:
    iota, beta = _iota(), _beta()
    t_sig = NOW - 3_600.0
    last = t_sig - iota + 1.5 * beta  # due only with both signals' shifts
    row = _row(last, 2, t_sig)
    assert _observed(row) == pytest.approx(_v(iota + 3_600.0), rel=1e-12)


def test_a_proving_signal_counts_from_the_signal() -> None:
    # β = ∞ (a signal proves a change): the value at once is the page's stale one
    iota = _iota()
    row = _row(NOW - 0.5 * iota, 1, NOW - 600.0, beta=math.inf)
    assert _observed(row) == pytest.approx(_v(iota + 600.0), rel=1e-12)
    assert _observed(row) < float(values_of_columns(row, NOW, None)[0])
    # a second proving signal: the first one made it due
    row = _row(NOW - 0.5 * iota, 2, NOW - 600.0, beta=math.inf)
    assert _observed(row) == float(values_of_columns(row, NOW, None)[0])


def test_never_crawled_and_never_worth_a_crawl_count_at_their_value() -> None:
    rows = np.concatenate([_row(math.nan, 1, NOW - 60.0), _row(NOW - 1e5, 1, NOW - 60.0)])
    rows["threshold_s"][1] = math.inf
    values, observed = values_and_observed(rows, NOW, None)
    assert np.array_equal(observed, values)
    assert np.array_equal(values, values_of_columns(rows, NOW, None))


def test_a_mixed_batch_gives_each_url_what_it_gives_alone() -> None:
    iota, beta = _iota(), _beta()
    rows = np.concatenate(
        [
            _row(NOW - iota + 0.5 * beta - 600.0, 1, NOW - 600.0),  # due at its signal
            _row(NOW - iota - 0.2 * DAY, 0, math.nan),  # due by time
            _row(NOW - 0.5 * iota, 1, NOW - 60.0, beta=math.inf),  # a proving signal
            _row(NOW - iota + 3.0 * beta, 1, NOW - 60.0),  # not yet due
        ]
    )
    values, observed = values_and_observed(rows, NOW, None)
    assert values.tolist() == values_of_columns(rows, NOW, None).tolist()
    alone = [_observed(rows[i : i + 1]) for i in range(len(rows))]
    assert observed.tolist() == pytest.approx(alone, rel=1e-12)
    assert [o < v for o, v in zip(observed, values, strict=True)] == [True, False, True, False]
