"""Run drills in order on one seeded timeline: reset the proxy (with the seed) before each, seed the memories
once, catch a drill's own crash as a failed row (with the error) so one broken drill never hides the others."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable

from services.drills.base import DrillContext, DrillResult
from services.drills.catalog import DRILLS
from services.turn_sim.workload import seed_history


async def seed_memories(ctx: DrillContext, settle_timeout_s: float = 60.0) -> None:
    await ctx.admin.reset(seed=ctx.seed)
    client = ctx.client()
    try:
        await client.reset(ctx.namespace)
        await client.ingest(ctx.namespace, seed_history(prefix="drill"))
        await client.settle(ctx.namespace, settle_timeout_s)
    finally:
        await client.close()


async def run_drills(ctx: DrillContext, names: Iterable[str] | None = None, seed_first: bool = True
                     ) -> list[DrillResult]:
    if seed_first:
        await seed_memories(ctx)
    out: list[DrillResult] = []
    for name in (list(names) if names is not None else list(DRILLS)):
        await ctx.admin.reset(seed=ctx.seed)
        t0 = time.perf_counter()
        try:
            r = await DRILLS[name](ctx)
        except Exception as e:
            r = DrillResult(name, "(drill crashed)", f"error: {type(e).__name__}: {e}"[:300], None, False,
                            {"traceback": traceback.format_exc()[-2000:]}, error=f"{type(e).__name__}: {e}")
        r.wall_s = time.perf_counter() - t0
        if ctx.sink is not None:
            ctx.sink.write("drill", **r.to_json())
        out.append(r)
    await ctx.admin.reset(seed=ctx.seed)
    return out


def drills_markdown(results: list[DrillResult]) -> str:
    lines = ["| scenario | expectation | measured | result |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.name} | {r.expectation} | {r.measured} | {'PASS' if r.passed else 'FAIL'} |")
    return "\n".join(lines)
