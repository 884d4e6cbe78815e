"""The one way the rig's services open Redis (the fault proxy's shared fault state, cortex-mock's job queue).

`async_redis(url)`: a redis.asyncio client for `url`. The password comes from the URL
(`redis://:PASSWORD@host:6379/0`) or, when the URL has none, from the environment variable REDIS_PASSWORD, so a
deployment can keep the password out of every command line (deploy/k8s sets REDIS_PASSWORD from the Secret
memrig-secrets and passes `--redis-url redis://redis:6379/0`; cortex-mock's worker processes inherit the
variable, not an argument). An empty REDIS_PASSWORD means none.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

PASSWORD_ENV = "REDIS_PASSWORD"


def redis_password(url: str, environ: dict[str, str] | None = None) -> str | None:
    """The password to send: None when the URL carries one (redis-py takes it from there) or none is set."""
    env = os.environ if environ is None else environ
    if urlsplit(url).password:
        return None
    return env.get(PASSWORD_ENV) or None


def async_redis(url: str, **kw: Any):
    import redis.asyncio as aioredis

    pw = redis_password(url)
    if pw is not None:
        kw.setdefault("password", pw)
    return aioredis.from_url(url, **kw)
