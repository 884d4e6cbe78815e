"""`python -m services.adapters.openclaw_real.install`: install Node's side of openclaw-real (`make setup-openclaw`);
exits 0 when OpenClaw is usable afterwards, else prints why and exits 1 (services/adapters/external)."""

from __future__ import annotations

import sys

from services.adapters.external.availability import install_main
from services.adapters.openclaw_real.node import install

if __name__ == "__main__":
    sys.exit(install_main("openclaw-real", install))
