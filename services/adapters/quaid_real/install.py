"""`python -m services.adapters.quaid_real.install`: install quaid-real's pinned Python packages (`make setup-quaid`).

Exits 0 when quaid-real can run afterwards; otherwise prints why and exits 1 (bench then skips quaid-real and says why).
"""

from __future__ import annotations

import sys

from services.adapters.quaid_real.source import QUAID_COMMIT, install, needed_pins


def main() -> int:
    a = install()
    if a.ok:
        pins = ", ".join(f"{d}=={v}" for d, v in needed_pins().items())
        print(f"quaid-real: Quaid {a.version} @ {QUAID_COMMIT[:7]} from {a.source}; {pins}")
        return 0
    print(f"quaid-real unavailable: {a.reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
