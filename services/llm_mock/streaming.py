"""`stream: true`: the completion sent as server-sent events in the OpenAI chunk format.

For each choice: a first chunk with `delta: {"role": "assistant", "content": ""}`, one chunk per word (a run
of non-space characters with the spaces after it; the deltas concatenate to exactly the non-streamed text),
then a chunk with an empty delta and the finish_reason. With `stream_options.include_usage` every chunk
carries `"usage": null` and one more chunk with `choices: []` carries the usage, as the OpenAI API documents
(platform.openai.com API reference, "The chat completion chunk object"). The stream ends with `data: [DONE]`.
Errors (bad input, injected failures, unknown model) are answered before the stream starts, as plain JSON with
their status, which is how the API and the SDK's stream reader expect them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

_PIECE = re.compile(r"\S+\s*|\s+")


def content_pieces(text: str) -> list[str]:
    return _PIECE.findall(text)


def chunk_events(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The chunk objects for a finished (non-streamed) completion dict, in send order."""
    head = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
        c = {**head, "choices": choices}
        if include_usage:
            c["usage"] = None
        return c

    out: list[dict[str, Any]] = []
    for choice in completion["choices"]:
        i = choice["index"]
        out.append(chunk([{"index": i, "delta": {"role": "assistant", "content": "", "refusal": None},
                           "logprobs": None, "finish_reason": None}]))
        for piece in content_pieces(choice["message"]["content"]):
            out.append(chunk([{"index": i, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}]))
        out.append(chunk([{"index": i, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]))
    if include_usage:
        out.append({**head, "choices": [], "usage": completion["usage"]})
    return out


async def send_stream(request: web.Request, completion: dict[str, Any], include_usage: bool) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
    })
    await resp.prepare(request)
    for event in chunk_events(completion, include_usage):
        await resp.write(b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp
