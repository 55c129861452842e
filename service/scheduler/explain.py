"""The use case behind ``GET /urls/{url}``: everything that decides when a URL is
crawled, and the decision in words.

The sentence comes from the rule that set the due time (:class:`DueReason`), found
as the store finds it: the lease; a failed fetch's retry, which only ever moves
the due time later than :func:`scheduler_core.due.due_time_and_cause` would put
it; else that function's own branch (registration, crawl value, revisit cap, not
worth a crawl).  One sentence per reason, in :data:`SENTENCES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scheduler_core.due import due_time_and_cause, value_due_time
from service import humanize as hz
from service.error_bodies import quote
from service.errors import NotFound
from service.explain_schemas import DueReason, ReadableExplanation
from service.scheduler.context import Context
from service.scheduler.learning import flush_relearn, history_of, priors_of
from service.scheduler.scoring import effective_elapsed, freshness_at, params_of, values_at
from service.schemas import EstimateOut, LearningOut, UrlExplanation
from service.store.base import HostState, UrlState
from service.store.estimate_columns import estimate_table

__all__ = ["SENTENCES", "Facts", "due_reason", "explain_url"]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def due_reason(state: UrlState, max_revisit_s: float) -> tuple[DueReason, float]:
    """The rule that set ``state.due_at``, and the due time the model's rules alone
    give (Unix s): the two differ only after a failed fetch."""
    if state.lease_id is not None:
        return DueReason.LEASED, state.due_at
    model_due, cause = due_time_and_cause(
        last_crawl_at=state.last_crawl_at,
        registered_at=state.registered_at,
        threshold_s=state.threshold_s,
        signal_time_equivalent_s=state.signal_time_equivalent_s,
        signals_since_crawl=state.signals_since_crawl,
        last_signal_at=state.last_signal_at,
        max_revisit_s=max_revisit_s,
    )
    # settle() puts a failed fetch at max(due, fetched + retry delay): later only
    if state.fetch_errors and state.due_at > model_due + 8 * math.ulp(model_due):
        return DueReason.FETCH_RETRY, model_due
    return DueReason(cause.value), model_due


@dataclass(frozen=True)
class Facts:
    """What a decision sentence may quote."""

    state: UrlState
    host: HostState
    now: float
    value: float  # V(τeff) now
    max_value: float  # W/Δ
    model_due: float  # the due time by the model's rules, Unix s
    max_revisit_s: float
    retry_delay_s: float
    min_revisit_s: float = 0.0


def _lambda(f: Facts) -> str:
    text = f"Λ = {f.state.scored_lambda:.4g}"
    current = f.host.threshold
    if not math.isclose(current, f.state.scored_lambda, rel_tol=1e-3):
        text += f" (Λ_h is {current:.4g} now: the rescorer will move the due time)"
    return text


def _leased(f: Facts) -> str:
    deadline = f.state.lease_deadline
    assert deadline is not None
    return (
        f"leased until {hz.iso_time(deadline)} ({hz.relative(deadline - f.now)}): "
        "a worker is fetching it"
    )


def _retry(f: Facts) -> str:
    n = f.state.fetch_errors
    return (
        f"its last fetch failed ({n} failed fetch{'es' if n > 1 else ''} so far): it is "
        f"tried again {hz.duration(f.retry_delay_s)} after the failure (without the failure "
        f"it was due at {hz.iso_time(f.model_due)})"
    )


def _registered(f: Facts) -> str:
    return f"never crawled: due since its registration at {hz.iso_time(f.state.registered_at)}"


def _value(f: Facts) -> str:
    interval = hz.duration(f.state.threshold_s)
    return (
        f"crawled when its crawl value (now {f.value:.4g}) reaches the threshold {_lambda(f)}, "
        f"after {interval} of effective elapsed time τeff"
    )


def _revisit_cap(f: Facts) -> str:
    s = f.state
    assert s.last_crawl_at is not None
    value_due = value_due_time(
        last_crawl_at=s.last_crawl_at,
        threshold_s=s.threshold_s,
        signal_time_equivalent_s=s.signal_time_equivalent_s,
        signals_since_crawl=s.signals_since_crawl,
        last_signal_at=s.last_signal_at,
    )
    return (
        f"revisited at the {hz.duration(f.max_revisit_s)} revisit cap: its crawl value "
        f"(now {f.value:.4g}) would reach the threshold {_lambda(f)} only at "
        f"{hz.iso_time(value_due)}, {hz.duration(value_due - s.last_crawl_at)} after its "
        "last crawl"
    )


def _not_worth(f: Facts) -> str:
    return (
        f"not worth a crawl at the threshold {_lambda(f)}: its most, W/Δ = {f.max_value:.4g}, "
        f"is below; revisited only because of the {hz.duration(f.max_revisit_s)} revisit cap"
    )


#: The decision sentence of each reason (every member has one: a test checks it).
SENTENCES: dict[DueReason, Callable[[Facts], str]] = {
    DueReason.LEASED: _leased,
    DueReason.FETCH_RETRY: _retry,
    DueReason.REGISTERED: _registered,
    DueReason.VALUE: _value,
    DueReason.REVISIT_CAP: _revisit_cap,
    DueReason.NOT_WORTH: _not_worth,
}


def _when(f: Facts) -> str:
    """Where the URL stands against its due time."""
    due, now, gate = f.state.due_at, f.now, f.host.gate_at
    if due > now:
        return f"due {hz.relative(due - now)}, at {hz.iso_time(due)}"
    since = f"due since {hz.iso_time(due)} ({hz.relative(due - now)})"
    if gate > now:
        return f"{since}; host politeness holds it until {hz.iso_time(gate)}"
    return f"{since}; waiting for a worker to ask /next"


_RETIRED = {
    "gone": "its host answered 404/410 {n} times in a row",
    "redirect": "it redirects permanently (301/308) to another URL, now registered",
    "done": "the crawler said it is done with it",
}


def _retired(f: Facts) -> str:
    reason = str(f.state.retire_reason)
    why = _RETIRED.get(reason, reason).format(n=f.state.gone_count)
    return (
        f"retired ({reason}) at {hz.iso_time(f.state.retired_at)}: {why}; it is not "
        "scheduled until it is registered again or signalled"
    )


def _held(f: Facts) -> str | None:
    """Why the host holds its URLs back now (pause, block), or None."""
    h = f.host
    if h.paused:
        return "its host is paused by an operator"
    if h.blocked_until is not None and h.blocked_until > f.now:
        until = hz.iso_time(h.blocked_until)
        if h.block_reason == "operator":
            return f"its host is blocked by an operator until {until}"
        n = h.consecutive_failures
        return (
            f"its host is backed off until {until} after {n} failed answer"
            f"{'s' if n != 1 else ''} (429, 5xx or none) in a row"
        )
    return None


def _floor(f: Facts) -> str | None:
    """Why the due time lies after the model's: refetch_after, or the minimum revisit."""
    st = f.state
    if not st.due_at > f.model_due:
        return None
    if st.refetch_after is not None and st.due_at == st.refetch_after:
        return f"the crawler asked for no fetch before {hz.iso_time(st.refetch_after)}"
    if st.last_crawl_at is not None and st.due_at == st.last_crawl_at + f.min_revisit_s:
        return (
            f"the minimum revisit interval ({hz.duration(f.min_revisit_s)} after its last "
            f"fetch) holds it until {hz.iso_time(st.due_at)}"
        )
    return None


def decision(reason: DueReason, facts: Facts) -> str:
    """The decision in words: the reason's sentence, then where the URL stands (a
    retired URL: why it was retired; a blocked or paused host: that first)."""
    if facts.state.retired_at is not None:
        return _retired(facts)
    sentence = SENTENCES[reason](facts)
    held = _held(facts)
    floor = _floor(facts) if reason is not DueReason.FETCH_RETRY else None
    if floor is not None and reason is not DueReason.LEASED:
        sentence = f"{sentence}; {floor}"
    if held is not None and reason is not DueReason.LEASED:
        return f"{sentence}; {held}; {_when(facts)}"
    if reason is DueReason.LEASED:
        return sentence
    return f"{sentence}; {_when(facts)}"


async def explain_url(ctx: Context, url: str) -> UrlExplanation:
    """Everything that decides when ``url`` is crawled, and the decision in words.

    Raises
    ------
    NotFound
        If the URL is not registered.
    """
    await flush_relearn(ctx)  # read your writes: estimates include every accepted event
    now = ctx.clock.now()
    (state,) = await ctx.store.get_urls([url])
    if state is None:
        raise NotFound(f"URL not registered: {quote(url)}")
    host = await ctx.store.get_host(state.host, now)
    assert host is not None, "a registered URL has a host"
    stats_lambda0 = (await ctx.store.stats(ctx.clock, 0)).lambda0
    s = ctx.settings
    p = params_of([state])
    value = float(values_at([state], now, s.value_terms)[0])
    tau_eff = float(effective_elapsed([state], now)[0])
    fresh_p = float(freshness_at([state], now)[0])
    reason, model_due = due_reason(state, s.max_revisit_s)
    facts = Facts(
        state, host, now, value, float(p.max_value[0]), model_due, s.max_revisit_s,
        s.retry_delay_s, s.min_revisit_s,
    )  # fmt: skip
    elapsed = None if state.last_crawl_at is None else now - state.last_crawl_at
    readable = ReadableExplanation(
        now=str(hz.iso_time(now)),
        registered_at=str(hz.iso_time(state.registered_at)),
        last_crawl_at=hz.iso_time(state.last_crawl_at),
        due_at=str(hz.iso_time(state.due_at)),
        due=hz.relative(state.due_at - now),
        lease_deadline=hz.iso_time(state.lease_deadline),
        host_gate_at=hz.iso_time(_finite(host.gate_at)),
        elapsed=hz.duration(elapsed),
        effective_elapsed=hz.duration(tau_eff) if state.last_crawl_at is not None else None,
        threshold_interval=str(hz.duration(state.threshold_s)),
        signal_time_equivalent=str(hz.duration(state.signal_time_equivalent_s)),
        max_revisit=str(hz.duration(s.max_revisit_s)),
        retry_delay=str(hz.duration(s.retry_delay_s)),
        requests_per_day=hz.per_day(state.weight),
        changes_per_day=hz.per_day(state.change_rate),
        signals_per_day=hz.per_day(float(p.signal_rate[0])),
        false_signals_per_day=hz.per_day(state.false_signal_rate),
        unsignalled_changes_per_day=hz.per_day(float(p.unsignalled_change_rate[0])),
        mean_time_between_changes=str(
            hz.duration(1.0 / state.change_rate if state.change_rate > 0 else math.inf)
        ),
        freshness_probability=f"{100 * fresh_p:.1f}%",
    )
    return UrlExplanation(
        url=state.url,
        host=state.host,
        weight=state.weight,
        change_rate=state.change_rate,
        recall=state.recall,
        false_signal_rate=state.false_signal_rate,
        signal_rate=float(p.signal_rate[0]),
        precision=float(p.precision[0]),
        unsignalled_change_rate=float(p.unsignalled_change_rate[0]),
        signal_time_equivalent_s=_finite(state.signal_time_equivalent_s),
        now=now,
        registered_at=state.registered_at,
        last_crawl_at=state.last_crawl_at,
        elapsed_s=elapsed,
        signals_since_crawl=state.signals_since_crawl,
        effective_elapsed_s=_finite(tau_eff),
        crawl_value=value,
        max_value=float(p.max_value[0]),
        threshold=host.threshold,
        lambda0=stats_lambda0,
        lambda_h=host.lambda_h,
        scored_threshold=state.scored_lambda,
        threshold_s=_finite(state.threshold_s),
        due_at=state.due_at,
        due_in_s=state.due_at - now,
        freshness_probability=fresh_p,
        lease_id=state.lease_id,
        lease_deadline=state.lease_deadline,
        host_gate_at=_finite(host.gate_at),
        clicks=state.clicks,
        signals=state.signals,
        stale_signals=(await ctx.store.stale_signals([url]))[0],
        crawls=state.crawls,
        changes=state.changes,
        fetch_errors=state.fetch_errors,
        learning=await _learning(ctx, state),
        decision=decision(reason, facts),
        due_reason=reason,
        readable=readable,
        status="active" if state.retired_at is None else "retired",
        retire_reason=None if state.retire_reason is None else str(state.retire_reason),
        retired_at=state.retired_at,
        gone_count=state.gone_count,
        refetch_after=state.refetch_after,
    )


async def _learning(ctx: Context, state: UrlState) -> LearningOut:
    """Estimate, prior and evidence of each learned quantity (the stored parameters
    are the estimates as of the URL's last re-score)."""
    p = params_of([state])
    used = {
        "weight": state.weight,
        "signal_rate": float(p.signal_rate[0]),
        "alpha": float(p.unsignalled_change_rate[0]),
        "theta": -math.log1p(-float(p.precision[0])) if p.precision[0] < 1 else math.inf,
    }
    h = history_of(estimate_table([state]), ctx.clock.now(), ctx.settings.estimate_decay_s)
    evidence = {
        "weight": float(h.clicks[0]),
        "signal_rate": float(h.signals[0]),
        "alpha": float(h.mask.sum()),
        "theta": float(h.mask.sum()),
    }
    priors = None
    if not state.prior.fixed:
        priors = (await priors_of(ctx, [state.host], [state.prior])).row(0)

    def out(q: str) -> EstimateOut:
        prior = None if priors is None else priors[q]
        return EstimateOut(
            estimate=used[q] if math.isfinite(used[q]) else None,
            prior_mean=None if prior is None else prior.mean,
            prior_shape=None if prior is None else prior.shape,
            observations=evidence[q],
        )

    return LearningOut(
        fixed=state.prior.fixed, label=state.prior.label, weight=out("weight"),
        signal_rate=out("signal_rate"), unsignalled_change_rate=out("alpha"),
        signal_quality=out("theta"),
    )  # fmt: skip
