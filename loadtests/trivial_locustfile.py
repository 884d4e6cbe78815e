"""Locust users that do nothing but `POST /v1/retrieve` to loadtests/trivial_target.py, back to back (no think
time): with the target doing no work, what such a run achieves is what the locust processes themselves can
send. `make load-bench` runs it in locust's distributed mode with 1, 2 and 4 workers (loadtests/locust_scaling.py)
to measure how the generator scales. Only ever loaded by a locust process (locust patches the process it runs in).
"""

from __future__ import annotations

import json

from locust import FastHttpUser, constant, task

BODY = json.dumps({"query": "what is the cache ttl", "top_k": 10, "mode": "fast"})
HEADERS = {"content-type": "application/json", "x-api-key": "memrig-bench"}


class TrivialRetrieveUser(FastHttpUser):
    wait_time = constant(0)

    @task
    def retrieve(self) -> None:
        self.client.post("/v1/retrieve", data=BODY, headers=HEADERS, name="/v1/retrieve")
