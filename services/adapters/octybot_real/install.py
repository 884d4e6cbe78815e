"""`python -m services.adapters.octybot_real.install` (`make setup-octybot`): install Bun for octybot-real.

Exits 0 when octybot-real is usable afterwards; otherwise prints why and exits 1."""

from __future__ import annotations

import sys
import time

from services.adapters.octybot_real.runtime import OCTYBOT_COMMIT, install


def main() -> int:
    t0 = time.perf_counter()
    a = install()
    if a.ok:
        print(f"octybot-real: Octybot {OCTYBOT_COMMIT[:7]} at {a.source} on Bun {a.bun_version} ({a.bun}); "
              f"hooks' imports resolve ({time.perf_counter() - t0:.1f} s)")
        return 0
    print(f"octybot-real unavailable: {a.reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
