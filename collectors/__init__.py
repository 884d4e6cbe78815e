"""Collectors: measure a running agent host and feed both Prometheus and the run's JSONL samples.

One concept per file: latency (turn timing), resources (RSS / heap / leak slope), event_loop (loop delay),
network (aiohttp request counter), tokens (tokens injected into the prompt). `samples.SampleSink` is the
JSONL side; `prom.get_metric` shares metric objects per registry.
"""
