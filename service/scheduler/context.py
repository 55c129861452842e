"""What every use case works with: the store, the clock, the settings, the metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler_core.multipliers import TrackerConfig
from service.clock import Clock
from service.errors import InvalidInput
from service.metrics import Metrics
from service.settings import Settings
from service.store.base import Store

__all__ = ["Context"]


@dataclass(frozen=True)
class Context:
    """Dependencies of the use cases (one per app)."""

    store: Store
    clock: Clock
    settings: Settings
    metrics: Metrics

    @property
    def tracker(self) -> TrackerConfig:
        """How fast λ₀ and λ_h move."""
        return TrackerConfig(self.settings.lambda_window, self.settings.lambda_clip)

    def check_batch(self, field: str, size: int) -> None:
        """Raise InvalidInput when a batch exceeds ``max_batch``."""
        if size > self.settings.max_batch:
            raise InvalidInput((field,), f"at most {self.settings.max_batch} items per batch")

    def check_times(self, field: str, name: str, times: Iterable[float | None], now: float) -> None:
        """Raise InvalidInput for the first time that leads the clock by more than the
        tolerance (``future_tolerance_s`` wall seconds, scaled by the clock rate)."""
        limit = now + self.settings.future_tolerance_s * self.clock.rate
        for i, t in enumerate(times):
            if t is not None and t > limit:
                raise InvalidInput(
                    (field, i, name), f"time {t:.3f} is in the future (clock reads {now:.3f})"
                )
