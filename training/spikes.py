"""Loss-spike guard: skip updates whose loss (or, while the loss is not falling, gradient norm) jumps
far above the recent median, and ask for a rollback when skips cluster (the remedy of PaLM,
Chowdhery et al. 2022, section 5.1: restart from a checkpoint before the spike and skip the batches
around it).

It must never make training worse than no guard, which an earlier version did: a gradient norm that
rose after warm-up (2 -> 124, normal early in training) was skipped forever, the next checkpoint saved
weights that had not moved, and every rollback returned to them. So:
- gradient norms are neither tested nor recorded during warm-up, where they say nothing about later
  steps (losses are: a loss spike is a spike at any step);
- with gradient clipping on (`--clip`, the default), a finite gradient norm cannot blow the weights up:
  the update is bounded, and skipping such steps only froze training (on the demo shards, norms of
  3-6 against a median of 0.8 came and went while the loss kept falling). Then only the loss and
  non-finite values decide. Without clipping, a norm jump counts unless the loss is still falling;
- skipped values also enter the history, so a lasting change of level becomes the new normal;
- the trainer saves no checkpoint when no update was applied since the last one, and stops with an
  error naming the steps when rollbacks repeat (`max_rollbacks` within `rollback_window` steps).
"""
from __future__ import annotations

import collections
import dataclasses
import math
import statistics

from common.settings import check


@dataclasses.dataclass
class SpikeConfig:
    """The loss-spike guard: skip, roll back, or stop."""

    factor: float = 3.0        # skip when loss or grad norm > factor x median of recent steps (0: guard off)
    history: int = 50          # steps the median is taken over
    min_history: int = 10      # no loss test before this many steps, no norm test before this many after warm-up
    max_skips: int = 3         # this many skips ...
    skip_window: int = 20      # ... within this many steps: roll back to the last checkpoint
    max_rollbacks: int = 3     # more rollbacks than this ...
    rollback_window: int = 500  # ... within this many steps: stop with an error (training diverges)

    def __post_init__(self):
        check(self.factor == 0 or self.factor > 1, f"factor must be 0 (guard off) or above 1, got {self.factor}")
        small = [k for k in ("history", "min_history", "max_skips", "skip_window", "rollback_window")
                 if getattr(self, k) < 1]
        check(not small, f"must be >= 1: {', '.join(small)}")
        check(self.max_rollbacks >= 0, "max_rollbacks must be >= 0")


class TrainingDiverged(RuntimeError):
    """Rollbacks keep happening: the run stops with the steps named instead of looping."""


class SpikeGuard:
    def __init__(self, cfg: SpikeConfig, warmup: int = 0, clip: float = 0.0) -> None:
        self.cfg, self.warmup, self.clip = cfg, warmup, clip
        self.losses: collections.deque[float] = collections.deque(maxlen=cfg.history)
        self.norms: collections.deque[float] = collections.deque(maxlen=cfg.history)
        self.skipped_at: collections.deque[int] = collections.deque()
        self.rollbacks: list[int] = []

    def check(self, loss: float, grad_norm: float) -> str | None:
        """Why this step (1-based) must not update the weights, or None. Non-finite values are always refused."""
        if not math.isfinite(loss):
            return "non-finite loss"
        if not math.isfinite(grad_norm):
            return "non-finite grad norm"
        if self.cfg.factor <= 0 or len(self.losses) < self.cfg.min_history:
            return None
        loss_median = statistics.median(self.losses)
        if loss > self.cfg.factor * loss_median:
            return f"loss spike {loss:.4g} > {self.cfg.factor:g} x median {loss_median:.4g}"
        if self.clip > 0 or len(self.norms) < self.cfg.min_history:
            return None
        norm_median = statistics.median(self.norms)
        if grad_norm > self.cfg.factor * norm_median and loss >= loss_median:
            return f"grad-norm spike {grad_norm:.4g} > {self.cfg.factor:g} x median {norm_median:.4g}"
        return None

    def observe(self, loss: float, grad_norm: float, step: int) -> None:
        """Record a finite step, applied or skipped (so a lasting shift becomes the median); gradient
        norms only after warm-up."""
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.losses.append(loss)
            if step > self.warmup:
                self.norms.append(grad_norm)

    def skipped(self, step: int) -> bool:
        """Record a skip; True when the skips in the window call for a rollback."""
        self.skipped_at.append(step)
        while self.skipped_at and self.skipped_at[0] <= step - self.cfg.skip_window:
            self.skipped_at.popleft()
        return len(self.skipped_at) >= self.cfg.max_skips

    def rolled_back(self, step: int) -> None:
        """Record a rollback at `step`; raises TrainingDiverged when they repeat too often."""
        self.rollbacks.append(step)
        recent = [s for s in self.rollbacks if s > step - self.cfg.rollback_window]
        if len(recent) > self.cfg.max_rollbacks:
            raise TrainingDiverged(
                f"{len(recent)} rollbacks within {self.cfg.rollback_window} steps (at steps "
                f"{', '.join(map(str, recent))}): training keeps diverging; lower --lr, raise --spike-factor, "
                "or turn the guard off with --spike-factor 0")

    def reset_skips(self) -> None:
        self.skipped_at.clear()
