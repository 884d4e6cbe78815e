"""`python -m services.adapters.octybot_real.install` (`make setup-octybot`): install Bun for octybot-real; exits 0
when octybot-real is usable afterwards, else prints why and exits 1 (services/adapters/external)."""

from __future__ import annotations

import sys

from services.adapters.external.availability import install_main
from services.adapters.octybot_real.runtime import install

if __name__ == "__main__":
    sys.exit(install_main("octybot-real", install))
