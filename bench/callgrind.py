"""Redis's own instructions, counted by valgrind's callgrind: a meter of script cost that
does not move with the machine's load.

:data:`wrapper` runs ``redis-server`` under callgrind, collecting only inside
``evalGenericCommand`` (every ``EVAL``/``EVALSHA``: the scripts, the commands they call
and the conversion of their arguments and answers), and :func:`instructions` reads the
count so far from the running server (``callgrind_control -e Ir``).  The server runs
about 30-50 × slower under valgrind: use small stores.  Raises ``RuntimeError`` when
valgrind is missing (``apt-get install valgrind``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["instructions", "wrapper"]

_TOTAL = re.compile(r"^\s*Th\s+\d+\s+([\d,]+)\s*$", re.MULTILINE)


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found on PATH: apt-get install valgrind")
    return path


def wrapper(out_dir: Path) -> list[str]:
    """The command line prefix that runs a server under callgrind, its profile files in
    ``out_dir``, counting script execution alone."""
    return [
        _binary("valgrind"), "--tool=callgrind", "--collect-atstart=no",
        "--toggle-collect=evalGenericCommand", f"--callgrind-out-file={out_dir}/callgrind.%p",
        f"--log-file={out_dir}/valgrind.%p.log",
    ]  # fmt: skip


def instructions(pid: int) -> float:
    """Instructions the server ``pid`` has executed in scripts so far (all threads).

    Raises
    ------
    RuntimeError
        If callgrind_control cannot read the process's counters.
    """
    done = subprocess.run(
        [_binary("callgrind_control"), "-e", "Ir", str(pid)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    totals = _TOTAL.findall(done.stdout)
    if done.returncode != 0 or not totals:
        raise RuntimeError(f"callgrind_control -e Ir {pid}: {done.stdout}{done.stderr}")
    return float(sum(int(t.replace(",", "")) for t in totals))
