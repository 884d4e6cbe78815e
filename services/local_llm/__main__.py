"""`python -m services.local_llm --port P` (`memrig serve local-llm`): prints `READY http=<port> pid=<pid>`."""

import sys

from services.local_llm.server import main

sys.exit(main())
