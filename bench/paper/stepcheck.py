"""Does batching decisions (``crawls_per_step`` = k > 1) change the accuracy?

Each case ``SIGNALS:M:POLICY:K`` (e.g. ``ncis:1000:greedy-ncis:10``) runs POLICY
on one paper world (seed 0, R = 100, t ≤ 1000; ``delay`` as ``ncis-delay``)
with k = 1 (the paper's Algorithm 1) and with k = K, and records both
accuracies, their standard errors over URLs, the paired s.e. of their
difference (per-URL differences: both runs see the same clicks and changes)
and the CPU times in
``results/stepcheck.json``; ``results/stepcheck.md`` tabulates every case
measured so far.  The fig*.py scripts quote these rows beside each k > 1 they use.

A k = 1 run of an expensive policy at large m takes far longer than 10 minutes:
this is a one-off measurement, not one of the paper's figures.

    python bench/paper/stepcheck.py ncis:100:greedy-ncis:10 none:10000:crawlsched:100
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from common import RESULTS, Job, markdown_table, paired_se, paper_spec, per_r_s, run_jobs

STORE = RESULTS / "stepcheck.json"


def load() -> dict[str, dict]:
    """Every case measured so far, by case string."""
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def case_spec(signals: str, m: int, *, seed: int = 0, quick: bool = False):
    """The world of a case (``ncis-delay``: Poisson(6)/R delays, App. C)."""
    days = 20.0 if quick else 1000.0
    if signals == "ncis-delay":
        return paper_spec(m, seed=seed, signals="ncis", delay=6, days=days)
    return paper_spec(m, seed=seed, signals=signals, days=days)


def lookup(signals: str, m: int, policy: str, k: int) -> str:
    """A one-line summary of the k = 1 check of a case, for the figures' notes.

    Without a check at ``k`` itself, the check at the nearest coarser k is quoted
    (batching costs accuracy monotonically in k in every check so far).
    """
    store = load()
    coarser = sorted(
        int(key.rsplit(":", 1)[1])
        for key in store
        if key.startswith(f"{signals}:{m}:{policy}:") and int(key.rsplit(":", 1)[1]) >= k
    )
    if not coarser:
        return f"{policy} m={m} k={k}: k = 1 check not measured"
    kk = coarser[0]
    row = store[f"{signals}:{m}:{policy}:{kk}"]
    d = row["acc_k"] - row["acc_1"]
    bound = "" if kk == k else f" (checked at k={kk}, coarser than the k={k} used)"
    return (
        f"{policy} m={m}{bound}: k=1 {row['acc_1']:.4f}, k={kk} {row['acc_k']:.4f}, difference"
        f" {d:+.4f} ± {row['se_d']:.4f} (paired s.e. over URLs; {verdict(row)});"
        f" CPU {row['cpu_1']:.0f} s at k=1, {row['cpu_k']:.0f} s at k={kk}"
    )


def verdict(row: dict) -> str:
    """Whether k agrees with k = 1: |difference| within one / two paired s.e."""
    z = abs(row["acc_k"] - row["acc_1"]) / row["se_d"]
    return "within 1 s.e." if z <= 1 else "within 2 s.e." if z <= 2 else f"{z:.1f} s.e. apart"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="+", help="SIGNALS:M:POLICY:K")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="20 days, not stored")
    args = parser.parse_args()
    jobs, keys = [], []
    for case in args.cases:
        signals, m, policy, k = case.split(":")
        spec = case_spec(signals, int(m), quick=args.quick)
        discard = 5 * per_r_s(spec) if policy.endswith("-d") else 0.0
        name = policy.removesuffix("-d") if policy.endswith("-d") else policy
        for steps in (1, int(k)):
            jobs.append(Job(spec, name, crawls_per_step=steps, signal_discard_s=discard))
        keys.append(case)
    started = time.perf_counter()
    out = run_jobs(jobs, workers=args.workers)
    store = load()
    for j, case in enumerate(keys):
        one, many = out[2 * j], out[2 * j + 1]
        row = {
            "acc_1": one["accuracy"],
            "se_1": one["page_se"],
            "cpu_1": one["cpu_s"],
            "acc_k": many["accuracy"],
            "se_k": many["page_se"],
            "cpu_k": many["cpu_s"],
            "se_d": paired_se(many, one, relative=False),
        }
        print(case, row, file=sys.stderr)
        if not args.quick:
            store[case] = row
    if args.quick:
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    STORE.write_text(json.dumps(store, indent=1, sort_keys=True) + "\n")
    rows = []
    for case, r in sorted(store.items()):
        signals, m, policy, k = case.split(":")
        d = r["acc_k"] - r["acc_1"]
        rows.append(
            [
                signals,
                m,
                policy,
                k,
                f"{r['acc_1']:.4f} ± {r['se_1']:.4f}",
                f"{r['acc_k']:.4f} ± {r['se_k']:.4f}",
                f"{d:+.4f} ± {r['se_d']:.4f}",
                verdict(r),
                f"{r['cpu_1']:.0f} / {r['cpu_k']:.0f}",
            ]
        )
    header = [
        "signals",
        "m",
        "policy",
        "k",
        "accuracy k=1",
        "accuracy k",
        "k − 1 (paired s.e.)",
        "agreement",
        "CPU s (k=1 / k)",
    ]
    text = "\n".join(
        [
            "# crawls_per_step check: k = 1 vs k > 1 on one instance",
            "",
            "Seed 0, R = 100 per day, t ≤ 1000 days, warm-up 100 days; accuracy ="
            " click-weighted freshness ± its s.e. over URLs (common.page_se, one run).",
            "The two runs share the world (same clicks and changes): their difference"
            " has the paired s.e. over URLs of the per-URL differences"
            " (common.paired_se), far below the runs' own s.e.",
            "",
            markdown_table(header, rows),
            "",
            f"Last invocation: {time.perf_counter() - started:.0f} s"
            f" (`python bench/paper/stepcheck.py {' '.join(args.cases)}`).",
            "",
        ]
    )
    (RESULTS / "stepcheck.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
