"""Copy the latest tables of ``results/*.md`` into bench/README.md.

Rewrites the part of bench/README.md between the markers below (appending the
section if they are missing) from the figures' result files and ``INTRO``.

    python bench/paper/readme.py
"""

from __future__ import annotations

import re
from pathlib import Path

from common import RESULTS

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN = "<!-- paper-experiments:begin (python bench/paper/readme.py) -->"
END = "<!-- paper-experiments:end -->"
FIGURES = (
    ("fig2", "Figure 2 (§6.4): GREEDY, LDS, crawlsched vs BASELINE, no signals"),
    ("fig3", "Figure 3 (§6.5): signals without false positives"),
    ("fig4", "Figure 4 (§6.6): signals with false positives"),
    ("fig8", "Figure 8 (App. C): delayed signals, GREEDY-NCIS-D"),
    ("fig9", "Figure 9 (App. D): R = 100 → 150 → 100"),
)
INTRO = """\
## Paper experiments (bench/paper/)

Paper 004's synthetic experiments (`/work/shared/papers/004_*.txt`, §6.3-6.6,
App. B-D), each a plain script run from the repository root:

```bash
. .venv/bin/activate
python bench/paper/fig2.py            # full settings (m, R = 100/day, t ≤ 1000 days)
python bench/paper/fig2.py --quick    # smoke test: 20 days, small m (~30 s)
python bench/paper/fig2.py --reps 5   # more repetitions (longer)
python bench/paper/fig2.py --report   # rewrite the table from the last run's results
python bench/paper/stepcheck.py ncis:1000:greedy-ncis:10   # k = 1 vs k = 10 on one world
python bench/paper/readme.py          # copy the latest tables into this file
```

Each writes `bench/paper/results/<name>.md` (the table, its settings and notes),
`<name>.png` (matplotlib) and `<name>.json` (the raw numbers), and prints the
table.  `common.py` holds the shared parts: `paper_spec` (the paper's units: one
time unit = one day, μ_i, Δ_i ~ U(0, 1)/day, recall ~ Beta(0.25, 0.25),
ν_i ~ U(0.1, 0.6)/day), a 2-process runner over (world, policy) jobs that
keeps each process's last worlds, mean ± standard error, the markdown and the
plots.  `bench/paper/ruff.toml` marks the scripts' sibling imports first-party.

Reading the tables: accuracy = click-weighted freshness (the paper's
"fraction of requests that find a fresh copy") of the clicks after a 10%
warm-up; mean ± s.e. over n repetitions (world seeds 0..n−1); `†` marks a
single repetition, whose s.e. comes from the spread over its URLs
(`common.page_se`: click, change and parameter noise; for differences and
ratios of two runs on one world, of the per-URL differences); `k` =
`crawls_per_step` (decisions batched every k/R days) where it is > 1, with its
k = 1 check on one world in `results/stepcheck.md`.  The paper averages 100
repetitions; its OCR'd text kept axis numbers only for Figure 2.  Runtimes
were measured on the shared 2-core machine while other jobs ran (the load
average is in each table's notes; "CPU s" is load-independent).
"""


def section() -> str:
    """The README section from the current result files."""
    parts = [INTRO]
    rows = ["| command | reproduces | wall s (load) | CPU s |", "|---|---|---|---|"]
    bodies = []
    for name, title in FIGURES:
        path = RESULTS / f"{name}.md"
        if not path.exists():
            rows.append(f"| `python bench/paper/{name}.py` | {title} | not run yet | |")
            continue
        text = path.read_text()
        wall = re.search(r"Runtime: (\d+) s", text)
        load = re.search(r"load average at the end: ([\d.]+) \(1 min\)", text)
        cpu = sum(float(x) for x in re.findall(r"@\d+: (\d+)", text))
        rows.append(
            f"| `python bench/paper/{name}.py` | {title} |"
            f" {wall.group(1) if wall else '?'} ({load.group(1) if load else '?'}) | {cpu:.0f} |"
        )
        table = [line for line in text.splitlines() if line.startswith("|")]
        notes = [
            line
            for line in text.splitlines()
            if line.startswith("- ") and not line.startswith(("- CPU seconds", "- load average"))
        ]
        bodies += [f"### {title}", "", *table, "", *notes, ""]
    parts += ["\n".join(rows), "", *bodies]
    return "\n".join(parts).rstrip() + "\n"


def main() -> None:
    text = README.read_text()
    block = f"{BEGIN}\n{section()}{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block
    README.write_text(text)
    print(f"wrote {README}")


if __name__ == "__main__":
    main()
