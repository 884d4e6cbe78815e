"""`python -m services.adapters.openclaw_real.install`: install Node's side of openclaw-real (`make setup-openclaw`).

Exits 0 when OpenClaw is usable afterwards; otherwise prints why and exits 1 (bench-all then skips openclaw-real
and says so in its report)."""

from __future__ import annotations

import sys

from services.adapters.openclaw_real.node import install


def main() -> int:
    a = install()
    if a.ok:
        print(f"openclaw-real: OpenClaw {a.openclaw} on Node {a.node_version} ({a.node})")
        return 0
    print(f"openclaw-real unavailable: {a.reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
