"""`python -m services.adapters.quaid_real.install`: install quaid-real's pinned Python packages (`make setup-quaid`);
exits 0 when quaid-real can run afterwards, else prints why and exits 1 (services/adapters/external)."""

from __future__ import annotations

import sys

from services.adapters.external.availability import install_main
from services.adapters.quaid_real.source import install

if __name__ == "__main__":
    sys.exit(install_main("quaid-real", install))
