"""The report of a run: the one table, its footer, and the figures as JSON.

Pure functions of a :class:`~runner.Report`; the targets the table checks are
:data:`TARGETS`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.table import Table

from config import LOAD_BATCH
from phases import RESULT_ROUTE, EventsResult, percentile
from raw_redis import FLOOR, RAW_CLIENTS
from runner import Report

TARGETS = {
    "dispatch": 0.5,  # ours ÷ raw Redis (one Lua script per batch), URLs/s, at least
    "events": 0.5,  # the event mix ÷ raw Redis (one Lua script per batch), at least
    "p99_ms": 10.0,  # /next p99 at half load, at most
    "bytes_per_url": 200.0,  # Redis memory per URL loaded, at most
}
#: The raw client the ratio targets are judged against.
JUDGED_RAW = "lua"
#: The embedded store's dispatch and event mix ÷ the Redis store's, at least.
MEMORY_OVER_REDIS = 2.0


#: What the layout rows run (the floors of ``raw_redis``).
FLOOR_NOTES = {
    "dispatch": "the commands lease.lua issues for a batch over the same shards, none of "
    "its logic (raw_redis.FLOOR_DISPATCH_LUA), run as raw Redis's script is; ",
    "events": "the commands each event brings about in the store (the fold's and the "
    "re-estimation's writes with their queues' ZADD, the settlement's, the hosts' "
    "re-keying; raw_redis.FLOOR_EVENTS_LUA), batches of one kind in the mix's "
    "proportions, run as raw Redis's script is; ",
}


def verdict(ok: bool) -> str:
    """PASS or MISS, coloured."""
    return "[green]PASS[/]" if ok else "[red]MISS[/]"


def raw_cells(rep: Report, kind: str, ours: float) -> tuple[str, str]:
    """The raw-Redis column (one line per client of :data:`RAW_CLIENTS`) and ours/raw."""
    raws = [(how, rep.raw.get(f"{kind} {how}", float("nan"))) for how in RAW_CLIENTS]
    return (
        "\n".join(f"{v:,.0f} {how}" for how, v in raws),
        "\n".join(f"{ours / v:.3f}" if v > 0 else "" for _, v in raws),
    )


def refused_note(ev: EventsResult) -> str:
    """What the API refused of a phase's events (503: its fold lagged), if anything."""
    n = sum(ev.refused.values())
    return f", {n:,} refused (fold lag, sent again)" if n else ""


def fold_note(rep: Report, kind: str) -> str:
    """How far behind the fold was when a phase ended, and when it had caught up."""
    if kind not in rep.fold_after:
        return ""
    lag, drain = rep.fold_after[kind]
    return f"; the fold {lag:.1f} s behind at the end, caught up {drain:.1f} s later"


def raw_rate(rep: Report, kind: str) -> float:
    """The raw rate the ratio targets are judged against (:data:`JUDGED_RAW`); NaN when
    the raw phase did not run (the target is then a MISS)."""
    return rep.raw.get(f"{kind} {JUDGED_RAW}", float("nan"))


def build_table(rep: Report) -> Table:
    """The one table of the run."""
    cfg = rep.cfg
    t = Table(
        title=f"crawlsched dispatch bench: {cfg.store} store, {cfg.urls:,} URLs, "
        f"Redis with {'its default' if cfg.redis_defaults else 'the store’s'} listpack settings, "
        f"{cfg.hosts:,} hosts, one API process, {cfg.workers} connections, "
        f"{os.cpu_count()} cores, "
        f"wall {rep.wall_s:.0f} s",
        show_lines=True,
    )
    for col in ("figure", "measured", "target", "", "raw Redis", "ours/raw", "notes"):
        t.add_column(col, overflow="fold")
    load = rep.load
    how = (
        f"via POST /urls, batches of {LOAD_BATCH:,} ({load.api_urls:,} URLs, "
        f"{cfg.load_workers} connections); {rep.notes.get('load_api', '')}"
    )
    t.add_row("registration (URLs/s)", f"{load.rate('api'):,.0f}", "", "", "", "", how)
    if load.direct_urls:
        t.add_row(
            "registration in-process (URLs/s)",
            f"{load.rate('direct'):,.0f}",
            "", "", "", "",
            f"the last {load.direct_urls:,} URLs (after the {cfg.load_budget:.0f} s budget of "
            f"POST /urls) via registry.register → RedisStore.upsert_urls in the bench "
            f"process; {rep.notes.get('load_direct', '')}",
        )  # fmt: skip
    sample = rep.mem_sample
    memory_rows = (
        ("after load", rep.mem_loaded,
         f"empty {rep.mem_empty / 1e6:.1f} MB → {used_memory_mb(rep.mem_loaded)}; "
         f"MEMORY USAGE per URL of one host: queue {sample.get('queue', 0):.0f} B "
         f"({sample.get('queue_encoding')}), records {sample.get('urls', 0):.0f} B "
         f"({sample.get('urls_encoding')})"),
        ("after dispatch", rep.mem_dispatched,
         f"{used_memory_mb(rep.mem_dispatched)} with the {rep.leases_out:,} leases of (a) out"),
    )  # fmt: skip
    for label, used, extra in memory_rows if cfg.store == "redis" else ():
        per = rep.per_url(used)
        judged = label == "after load"  # the target is per URL loaded; leases add theirs
        t.add_row(
            f"Redis memory per URL, {label} (B)",
            f"{per:,.0f}",
            f"≤ {TARGETS['bytes_per_url']:.0f}" if judged else "",
            verdict(per <= TARGETS["bytes_per_url"]) if judged else "",
            "", "", extra,
        )  # fmt: skip
    d = rep.dispatch
    if d is not None:
        t.add_row(
            f"(a) dispatch, GET /next?n={cfg.n} (URLs/s)",
            f"{d.rate:,.0f}",
            f"≥ {TARGETS['dispatch']} × raw",
            verdict(d.rate >= TARGETS["dispatch"] * raw_rate(rep, "dispatch")),
            *raw_cells(rep, "dispatch", d.rate),
            f"{d.request_rate:,.1f} req/s over {d.seconds:.1f} s, {d.short} short answers; "
            f"closed-loop p50 {1000 * percentile(d.latencies, 0.5):.1f} ms, "
            f"p99 {1000 * percentile(d.latencies, 0.99):.1f} ms; {rep.notes['dispatch']}; "
            f"before it, {rep.scoring[0]:,.0f} URLs scored once λ₀ was known, in "
            f"{rep.scoring[1]:.1f} s",
        )
    lat = rep.latency
    if lat is not None:
        short = (
            ""
            if lat.full
            else (f"; only {lat.urls:,} of the {lat.asked:,} URLs asked: not a dispatch latency")
        )
        for q in (0.5, 0.99):
            ok = q < 0.9 or (lat.full and lat.p(q) <= TARGETS["p99_ms"])
            t.add_row(
                f"(c) /next p{round(q * 100)} at half load (ms)",
                f"{lat.p(q):,.1f}",
                f"≤ {TARGETS['p99_ms']:.0f}" if q > 0.9 else "",
                verdict(ok) if q > 0.9 else "",
                "", "",
                f"open loop {lat.rate:,.1f} req/s ({lat.sent} requests, "
                f"{lat.urls / lat.seconds:,.0f} URLs/s{short}); {rep.notes['latency']}"
                if q > 0.9 else "",
            )  # fmt: skip
    mix = rep.events.get("mix")
    if mix is not None:
        shares = ", ".join(
            f"{k} {v / mix.seconds:,.0f}/s ({v / max(1, mix.total):.0%})"
            for k, v in mix.events.items()
        )
        t.add_row(
            f"(b) events ingested, mix (events/s, batches of {cfg.event_batch:,})",
            f"{mix.rate:,.0f}",
            f"≥ {TARGETS['events']} × raw",
            verdict(mix.rate >= TARGETS["events"] * raw_rate(rep, "events")),
            *raw_cells(rep, "events", mix.rate),
            f"{shares}{' (leases ran out)' if mix.ran_out else ''}{refused_note(mix)}"
            f"{fold_note(rep, 'mix')}; {rep.notes['events_mix']}",
        )
    for kind, path in (("signal", "/signal"), ("click", "/click"), ("result", RESULT_ROUTE)):
        ev = rep.events.get(kind)
        if ev is None or ev.seconds <= 0:
            continue
        acc = sum(ev.accepted.values()) / max(1, ev.total)
        t.add_row(
            f"(b) {path} alone (events/s)",
            f"{ev.rate:,.0f}",
            "",
            "",
            *raw_cells(rep, "events", ev.rate),
            f"{ev.total:,} events in {ev.seconds:.1f} s, {acc:.0%} accepted"
            f"{f' ({rep.topped_up:,} leases topped up untimed)' if kind == 'result' else ''}"
            f"{' (leases ran out)' if ev.ran_out else ''}{refused_note(ev)}"
            f"{fold_note(rep, kind)}; {rep.notes[f'events_{kind}']}",
        )
    for kind, how, label in (
        ("dispatch", JUDGED_RAW, "(e) raw Redis, dispatch, one Lua script per batch (URLs/s)"),
        ("dispatch", FLOOR, "(e) the store's layout alone, dispatch (URLs/s)"),
        ("events", JUDGED_RAW, "(e) raw Redis, events, one Lua script per batch (events/s)"),
        ("events", FLOOR, "(e) the store's layout alone, the events mix (events/s)"),
    ):
        rate = rep.raw.get(f"{kind} {how}")
        if rate is None:
            continue
        floor = how == FLOOR
        lua = raw_rate(rep, kind)
        what = FLOOR_NOTES[kind] if floor else ""
        t.add_row(
            label,
            f"{rate:,.0f}",
            "", "",
            f"{lua:,.0f} lua" if floor else "",
            f"{rate / lua:.3f}" if floor and lua > 0 else "",
            what + rep.notes.get(f"raw {kind} {how}", ""),
        )  # fmt: skip
    for name, ops in rep.redis_benchmark.items():
        t.add_row(
            f"(e) redis-benchmark {name} -P 100 (ops/s)",
            "",
            "", "",
            f"{ops:,.0f}",
            "",
            "16 clients, 2,000,000 requests",
        )  # fmt: skip
    return t


def footer(rep: Report) -> str:
    """The paragraph under the table: how to read the raw-Redis and CPU columns, and how
    long the API took to stop."""
    return (
        "Raw Redis: the same server after the API stopped, the same work per URL/event; "
        "'redis-py' and 'resp' (pre-encoded commands, hiredis parser) pipeline it (3 round "
        "trips per dispatch batch, 2 per event batch), 'lua' runs one script per batch.  "
        "CPU shares are of one core (this machine has 2); 'other processes' is what the rest "
        f"of the machine used meanwhile.  The API stopped {rep.api_exit_s:.1f} s after SIGTERM "
        "(served_app kills it after 10 s).  Between the warm-up and (a) the bench waits "
        "until the rescorer has scored every URL the load left unscored "
        "(crawlsched_rescore_backlog_urls at 0): (a) and (c) run in steady state.  "
        "Signals and clicks count when appended; the fold "
        f"(a crawlsched worker with Redis) lagged {rep.fold_lag_end_s:.2f} s when the mix "
        f"ended (each event phase starts with nothing left to fold; "
        f"crawlsched_fold_lag_seconds: events not folded or their URLs not "
        f"re-estimated; re-estimation alone {rep.relearn_lag_end_s:.2f} s) and had applied "
        f"everything {rep.fold_drain_s:.2f} s later."
    )


def used_memory_mb(used: int) -> str:
    """``used`` bytes in MB."""
    return f"{used / 1e6:,.1f} MB"


def report_json(rep: Report) -> dict[str, Any]:
    """The figures as plain data."""
    d, lat = rep.dispatch, rep.latency
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(rep.cfg).items()},
        "wall_s": rep.wall_s,
        "api_exit_s": rep.api_exit_s,
        "leases_topped_up": rep.topped_up,
        "scoring_before_dispatch": {"urls": rep.scoring[0], "wall_s": rep.scoring[1]},
        "fold": {
            "lag_when_events_ended_s": rep.fold_lag_end_s,
            "relearn_lag_when_events_ended_s": rep.relearn_lag_end_s,
            "drain_s": rep.fold_drain_s,
            "after_each_phase": {
                k: {"lag_s": a, "drain_s": b} for k, (a, b) in rep.fold_after.items()
            },
        },
        "load": vars(rep.load),
        "memory": None
        if rep.cfg.store != "redis"
        else {
            "empty": rep.mem_empty,
            "loaded": rep.mem_loaded,
            "dispatched": rep.mem_dispatched,
            "leases_out": rep.leases_out,
            "per_url_loaded": rep.per_url(rep.mem_loaded),
            "per_url_dispatched": rep.per_url(rep.mem_dispatched),
            "sample_per_url": rep.mem_sample,
        },
        "dispatch": None
        if d is None
        else {
            "urls_per_s": d.rate,
            "requests_per_s": d.request_rate,
            "p50_ms": 1000 * percentile(d.latencies, 0.5),
            "p99_ms": 1000 * percentile(d.latencies, 0.99),
            "short_answers": d.short,
        },
        "latency_half_load": None
        if lat is None
        else {
            "rate": lat.rate,
            "sent": lat.sent,
            "urls": lat.urls,
            "asked": lat.asked,
            "full": lat.full,
            "p50_ms": lat.p(0.5),
            "p99_ms": lat.p(0.99),
        },  # fmt: skip
        "events": {
            k: {
                "events_per_s": v.rate,
                "events": v.events,
                "accepted": v.accepted,
                "seconds": v.seconds,
                "ran_out": v.ran_out,
                "refused": v.refused,
            }
            for k, v in rep.events.items()
        },
        "raw": rep.raw,
        "redis_benchmark": rep.redis_benchmark,
        "meters": rep.meters,
        "targets": TARGETS,
    }


def _others(rep: Report, key: str) -> str:
    """The rest of the machine's CPU during phase ``key`` (share of one core)."""
    cpu = rep.meters.get(key, {}).get("cpu_share", {})
    return f"{max(0.0, cpu.get('others', 0.0)):.0%}" if cpu else "?"


def store_ratios(memory: Report, redis_: Report) -> list[dict[str, Any]]:
    """The embedded store's figures beside the Redis store's, from two runs of one
    invocation: rate rows (higher is better) and latency rows (lower is better), each
    with memory ÷ redis and the other processes' CPU during the phase in each run."""
    rows: list[dict[str, Any]] = []

    def add(name: str, key: str, mem: float | None, red: float | None, target: bool) -> None:
        if mem is None or red is None:
            return
        ratio = mem / red if red > 0 else float("nan")
        rows.append(
            {
                "figure": name, "memory": mem, "redis": red, "memory_over_redis": ratio,
                "target": MEMORY_OVER_REDIS if target else None,
                "others_memory": _others(memory, key), "others_redis": _others(redis_, key),
            }
        )  # fmt: skip

    add("registration via POST /urls (URLs/s)", "load_api",
        memory.load.rate("api"), redis_.load.rate("api"), False)  # fmt: skip
    if memory.dispatch is not None and redis_.dispatch is not None:
        add("(a) dispatch (URLs/s)", "dispatch", memory.dispatch.rate, redis_.dispatch.rate, True)
    if memory.latency is not None and redis_.latency is not None:
        for q in (0.5, 0.99):
            add(f"(c) /next p{round(q * 100)} at half load (ms)", "latency",
                memory.latency.p(q), redis_.latency.p(q), False)  # fmt: skip
    for kind, label in (("mix", "mix"), ("signal", "/signal"), ("click", "/click"),
                        ("result", RESULT_ROUTE)):  # fmt: skip
        m, r = memory.events.get(kind), redis_.events.get(kind)
        if m is not None and r is not None:
            add(f"(b) events, {label} (events/s)", f"events_{kind}", m.rate, r.rate, kind == "mix")
    return rows


def ratio_table(rows: list[dict[str, Any]]) -> Table:
    """:func:`store_ratios` as a table."""
    t = Table(title="the embedded memory store ÷ the Redis store, same invocation")
    for col in ("figure", "memory", "redis", "memory ÷ redis", "target", "", "other processes"):
        t.add_column(col, overflow="fold")
    for r in rows:
        ratio, target = r["memory_over_redis"], r["target"]
        t.add_row(
            r["figure"], f"{r['memory']:,.1f}", f"{r['redis']:,.1f}", f"{ratio:.2f}",
            "" if target is None else f"≥ {target:g}",
            "" if target is None else verdict(ratio >= target),
            f"memory run {r['others_memory']}, redis run {r['others_redis']}",
        )  # fmt: skip
    return t
