"""A progress bar for ``crawlsched simulate``: one line per policy, and the optima's
solve before them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["policy_progress"]


@contextlib.contextmanager
def policy_progress(
    policies: Sequence[str], console: Console, *, show: bool = True
) -> Iterator[Callable[[str, float], None]]:
    """Show a bar per policy while the block runs; yields the callback that moves them
    (a policy's name and the share of its run done, in [0, 1]).

    The first line stands for solving the optima, which comes first: it is done when
    any policy reports progress.
    """
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<28}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not show,
    ) as bar:
        solving = bar.add_task("solving the optima", total=None)
        tasks: dict[str, TaskID] = {
            name: bar.add_task(name, total=1.0, start=False) for name in policies
        }

        def advance(policy: str, share: float) -> None:
            if not bar.tasks[solving].finished:
                bar.update(solving, total=1.0, completed=1.0)
            task = tasks.get(policy)
            if task is None:
                task = tasks[policy] = bar.add_task(policy, total=1.0, start=False)
            if bar.tasks[task].start_time is None:
                bar.start_task(task)  # its clock starts with its run
            bar.update(task, completed=min(max(share, 0.0), 1.0))

        yield advance
