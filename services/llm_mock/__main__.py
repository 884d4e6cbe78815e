"""Entry point: `python -m services.llm_mock --port P ...` prints `READY http=<port> pid=<pid>` once serving;
SIGTERM/SIGINT stop it gracefully."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from services.common import event_loop
from services.common.metrics_http import serve_http_until_stopped
from services.llm_mock.app import start_server
from services.llm_mock.config import MockConfig


def parse_args(argv: Sequence[str] | None = None) -> MockConfig:
    ap = argparse.ArgumentParser(
        prog="python -m services.llm_mock",
        description="Offline, deterministic, OpenAI-compatible chat server (answers, judges, compaction, flush, "
        "fact extraction).",
    )
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8790, help="HTTP port (0 = pick a free one; default 8790)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="fixed delay per chat request, ms (default 0)")
    ap.add_argument("--latency-jitter-ms", type=float, default=0.0,
                    help="plus a seeded uniform delay in [0, F] ms per chat request (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the jitter and injected-error draws (default 0)")
    ap.add_argument("--prompt-tokens-override", type=int, default=None,
                    help="report this many prompt tokens in usage instead of the cl100k count")
    ap.add_argument("--completion-tokens-override", type=int, default=None,
                    help="report this many completion tokens per choice instead of the cl100k count")
    ap.add_argument("--error-rate", type=float, default=0.0,
                    help="probability in [0, 1] that a valid chat request fails with --error-status (seeded)")
    ap.add_argument("--error-status", type=int, default=500,
                    help="HTTP status of injected failures: 500 (default), 502, 503, 504 or 429")
    ap.add_argument("--model", default=MockConfig.model, help=f"model id listed by /v1/models (default {MockConfig.model})")
    ap.add_argument("--model-alias", action="append", default=[], metavar="ID",
                    help="also answer (and list) model ID; repeatable; '*' accepts any model id. Without it an "
                    "unknown model is 404 model_not_found, as the OpenAI API answers")
    args = ap.parse_args(argv)
    cfg = MockConfig(
        host=args.host, port=args.port, latency_ms=args.latency_ms, latency_jitter_ms=args.latency_jitter_ms,
        seed=args.seed, prompt_tokens_override=args.prompt_tokens_override,
        completion_tokens_override=args.completion_tokens_override, error_rate=args.error_rate,
        error_status=args.error_status, model=args.model, model_aliases=tuple(args.model_alias),
    )
    try:
        return cfg.validate()
    except ValueError as e:
        ap.error(str(e))
        raise  # unreachable: ap.error exits


async def serve(cfg: MockConfig) -> None:
    runner, port = await start_server(cfg)
    await serve_http_until_stopped(runner, port)


def main(argv: Sequence[str] | None = None) -> None:
    cfg = parse_args(argv)
    try:
        event_loop.run(serve(cfg))
    except OSError as e:
        print(f"error: cannot serve on {cfg.host}:{cfg.port}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
