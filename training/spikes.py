"""Loss-spike guard: skip updates whose loss or gradient norm jumps far above the recent median, and
ask for a rollback when skips cluster (the remedy of PaLM, Chowdhery et al. 2022, section 5.1:
restart from a checkpoint before the spike and skip the batches around it)."""
from __future__ import annotations

import collections
import dataclasses
import math
import statistics
from typing import Deque, Optional


@dataclasses.dataclass
class SpikeConfig:
    factor: float = 3.0        # skip when loss or grad norm > factor x median of recent accepted steps
    history: int = 50          # accepted steps the median is taken over
    min_history: int = 10      # no spike test before this many accepted steps (early loss falls fast)
    max_skips: int = 3         # this many skips ...
    skip_window: int = 20      # ... within this many steps: roll back to the last checkpoint


class SpikeGuard:
    def __init__(self, cfg: SpikeConfig) -> None:
        self.cfg = cfg
        self.losses: Deque[float] = collections.deque(maxlen=cfg.history)
        self.norms: Deque[float] = collections.deque(maxlen=cfg.history)
        self.skipped_at: Deque[int] = collections.deque()

    def check(self, loss: float, grad_norm: float) -> Optional[str]:
        """Why this step must not update the weights, or None. Non-finite values are always refused."""
        if not math.isfinite(loss):
            return "non-finite loss"
        if not math.isfinite(grad_norm):
            return "non-finite grad norm"
        if self.cfg.factor <= 0 or len(self.losses) < self.cfg.min_history:
            return None
        loss_median, norm_median = statistics.median(self.losses), statistics.median(self.norms)
        if loss > self.cfg.factor * loss_median:
            return f"loss spike {loss:.4g} > {self.cfg.factor:g} x median {loss_median:.4g}"
        if grad_norm > self.cfg.factor * norm_median:
            return f"grad-norm spike {grad_norm:.4g} > {self.cfg.factor:g} x median {norm_median:.4g}"
        return None

    def accepted(self, loss: float, grad_norm: float) -> None:
        self.losses.append(loss)
        self.norms.append(grad_norm)

    def skipped(self, step: int) -> bool:
        """Record a skip; True when the skips in the window call for a rollback."""
        self.skipped_at.append(step)
        while self.skipped_at and self.skipped_at[0] <= step - self.cfg.skip_window:
            self.skipped_at.popleft()
        return len(self.skipped_at) >= self.cfg.max_skips

    def reset_skips(self) -> None:
        self.skipped_at.clear()
