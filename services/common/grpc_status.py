"""Which gRPC status a server answers for an exception, with a message a person can act on.

Bad input (any InputError, services/common/errors.py) is INVALID_ARGUMENT naming the field. A dependency that is
down or refusing (the LLM endpoint, the Cortex API, any socket) is UNAVAILABLE and says what is missing and how to
start it, so a client sees
"openclaw needs the LLM endpoint at http://127.0.0.1:8790/v1 ..." instead of `UNKNOWN: Unexpected <class
LLMError>`. A dependency that answers but refuses the request for good (a 4xx: wrong model name, bad key) is
FAILED_PRECONDITION. Anything else is INTERNAL with the exception's type and text. gRPC status semantics:
grpc.github.io/grpc/core/md_doc_statuscodes.html (UNAVAILABLE = "most likely a transient condition";
FAILED_PRECONDITION = "system is not in a state required for the operation").
"""

from __future__ import annotations

import asyncio

import aiohttp
import grpc

from services.common.errors import DependencyError, InputError
from services.common.llm_client import LLMError

LLM_HINT = ("start the llm-mock (`memrig up`, or `python -m services.llm_mock --port 8790`) or point "
            "MEMRIG_LLM_BASE_URL at a live OpenAI-compatible endpoint")


def status_for(e: BaseException, who: str) -> tuple[grpc.StatusCode, str]:
    """(status code, message) for an exception raised while `who` (a backend or service name) served a call."""
    if isinstance(e, InputError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(e)
    if isinstance(e, LLMError):
        where = f" at {e.url}" if getattr(e, "url", None) else ""
        if e.status is not None and 400 <= e.status < 500 and e.status != 429:
            return (grpc.StatusCode.FAILED_PRECONDITION,
                    f"{who} needs the LLM endpoint{where}, which refused the request: {e}. Check MEMRIG_LLM_MODEL "
                    "and MEMRIG_LLM_API_KEY.")
        return grpc.StatusCode.UNAVAILABLE, f"{who} needs the LLM endpoint{where}, which is unavailable ({e}); " \
            f"{LLM_HINT}."
    dep = e if isinstance(e, DependencyError) else e.__cause__  # an adapter may wrap it in its own message
    if isinstance(dep, DependencyError):
        if dep.refused:
            return grpc.StatusCode.FAILED_PRECONDITION, f"{who} needs {dep.dependency}, which refused the request: {e}"
        return (grpc.StatusCode.UNAVAILABLE, f"{who} needs {dep.dependency}, which is unavailable ({e})"
                + (f"; {dep.hint}." if dep.hint else "."))
    if isinstance(e, (aiohttp.ClientConnectionError, ConnectionError, asyncio.TimeoutError)):
        return grpc.StatusCode.UNAVAILABLE, f"{who}: a dependency is unreachable: {type(e).__name__}: {e}"
    return grpc.StatusCode.INTERNAL, f"{who}: internal error: {type(e).__name__}: {e}"
