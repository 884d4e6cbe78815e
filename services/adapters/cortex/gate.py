"""The recall hook's cold-start gate (Ubundi/openclaw-cortex, `src/features/recall/handler.ts`).

After `window` (3) consecutive failed recalls the plugin stops calling Cortex for `cooldown_ms` (30 s):
"Cortex recall: 3 consecutive failures, disabling for 30s"; the counter restarts from 0 when it trips, and
any success resets it. While the gate is open a recall costs nothing: no request is made.
`count_timeouts=False` gives the HEAD (v2.x) rule: a timeout is counted, checked against the window, then
undone, so timeouts alone rarely trip the gate. The clock is injectable so tests never sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("memrig.cortex")


class ColdStartGate:
    def __init__(self, window: int = 3, cooldown_ms: float = 30_000, count_timeouts: bool = True,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log):
        self.window = window
        self.cooldown_s = cooldown_ms / 1000.0
        self.count_timeouts = count_timeouts
        self.clock = clock
        self.logger = logger
        self.consecutive_failures = 0
        self.open_until = 0.0
        self.trips = 0

    def is_open(self) -> bool:
        """True while recall is disabled."""
        return self.window > 0 and self.clock() < self.open_until

    def remaining_s(self) -> float:
        return max(0.0, self.open_until - self.clock())

    def record_success(self) -> None:
        self.consecutive_failures = 0

    def record_failure(self, timeout: bool = False) -> bool:
        """Count a failed recall; True if this one tripped the gate."""
        if self.window <= 0:
            return False
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.window:
            self.open_until = self.clock() + self.cooldown_s
            self.consecutive_failures = 0
            self.trips += 1
            self.logger.warning("Cortex recall: %d consecutive failures, disabling for %gs",
                                self.window, self.cooldown_s)
            return True
        if timeout and not self.count_timeouts:
            self.consecutive_failures = max(self.consecutive_failures - 1, 0)
        return False
