"""`make load-bench-shards`: retrieve throughput of cortex-mock sharded by tenant over 1, 2 and 4 shards, each shard
its own process on this machine (as each is its own pod in deploy/k8s), the tenants spread by the fault proxy's
rule (services/fault_proxy/shards.py).

    python -m loadtests.shards --out DIR [--shards 1,2,4] [--tenants 8] [--memories 500] [--embedder minilm]
                               [--slo-p99-ms 250] [--start-rate 50] [--factor 1.5] [--step-s 4] [--refine 1]

For each shard count S:
1. Start S cortex-mock processes (`--processes 1`, each its own data dir) and one fault proxy with
   `--shard-map s0=URL,...` (services/launcher.py; every process stopped by PID at the end of its round).
2. Seed `tenants` tenants (API keys `memrig-shard-tenant-<i>`) with `memories` distinct memories each, through the
   proxy; then ask every shard directly how many memories each tenant holds there: a tenant must be whole on the
   shard `shard_owner` names and absent from the others (the round fails otherwise).
3. Warm every tenant (its snapshot and the query embeddings), then the open-loop rate search of loadtests/capacity.py
   (steps of `step_s` at start_rate x factor^k, a step passes when the run is valid, nothing failed and the
   corrected p99 is under the SLO; `refine` bisection steps) over the tenants in turn (request i is tenant
   i mod T), each request sent to its tenant's owner directly: the generator routes with the same function the
   proxy uses, so the figure is the shards' capacity, not the one proxy process's (the proxies scale with
   replicas, loadtests/README.md).
The shards, the proxy and the generator share this machine's cores: on 2 cores the curve says what a shard gives
while cores are free and where the box runs out, not how a cluster of S nodes scales.
Writes shards.json and shards.md into --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from loadtests.capacity import drain, idle_latency_ms, rate_search, seed_memories
from loadtests.capacity_report import machine_info
from loadtests.open_loop import DriverConfig, HttpRetrieveTarget, Validity
from services.common import event_loop
from services.fault_proxy.shards import shard_owner

KEY_PREFIX = "memrig-shard-tenant-"


def tenant_keys(n: int) -> list[str]:
    return [f"{KEY_PREFIX}{i}" for i in range(n)]


class TenantRoutedTarget:
    """Request i goes to tenant i mod T, at the URL of the shard that owns that tenant (`shard_owner`); the
    tenant's own requests take the queries in turn."""

    def __init__(self, shard_urls: Sequence[str], names: Sequence[str], keys: Sequence[str], concurrency: int,
                 top_k: int, mode: str):
        self.owner = {k: shard_owner(k, list(names)) for k in keys}
        self.targets = [HttpRetrieveTarget(shard_urls[self.owner[k]], k, concurrency, top_k=top_k, mode=mode,
                                           name=f"{k}@{names[self.owner[k]]}") for k in keys]
        self.name = f"{len(keys)} tenants over {len(shard_urls)} shard(s)"
        self.queries = self.targets[0].queries

    async def start(self) -> None:
        for t in self.targets:
            await t.start()

    async def call(self, i: int) -> None:
        n = len(self.targets)
        await self.targets[i % n].call(i // n)

    async def close(self) -> None:
        for t in self.targets:
            await t.close()


async def placement(shard_urls: Sequence[str], keys: Sequence[str]) -> dict[str, list[int | None]]:
    """{tenant key: [its memory count on shard 0, 1, ...]} asked of each shard directly."""
    out: dict[str, list[int | None]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        for k in keys:
            row: list[int | None] = []
            for url in shard_urls:
                async with s.get(f"{url}/v1/knowledge", headers={"x-api-key": k}) as r:
                    row.append(int((await r.json()).get("total_memories") or 0) if r.status == 200 else None)
            out[k] = row
    return out


def placement_errors(counts: dict[str, list[int | None]], names: Sequence[str], expect: int) -> list[str]:
    """Each tenant must hold `expect` memories on its owner and none elsewhere."""
    errs = []
    for k, row in counts.items():
        own = shard_owner(k, list(names))
        for i, c in enumerate(row):
            want = expect if i == own else 0
            if c != want:
                errs.append(f"{k}: {c} memories on shard {names[i]}, expected {want} (owner {names[own]})")
    return errs


async def one_round(a: argparse.Namespace, shards: int, out: Path) -> dict[str, Any]:
    from services.launcher import Rig

    t0 = time.monotonic()
    rig = Rig(out / f"rig-{shards}")
    names = [f"s{i}" for i in range(shards)]
    keys = tenant_keys(a.tenants)
    try:
        urls = []
        for n in names:
            p = await rig.start(f"cortex-mock/{n}", "services.cortex_mock",
                                ["--port", "0", "--embedder", a.embedder, "--seed", str(a.seed), "--data-dir",
                                 str(out / f"rig-{shards}" / f"data-{n}"), "--processes", "1"],
                                "http://127.0.0.1:{http}")
            urls.append(p.url)
        proxy = await rig.start("fault-proxy", "services.fault_proxy",
                                ["--port", "0", "--seed", str(a.seed),
                                 "--shard-map", ",".join(f"{n}={u}" for n, u in zip(names, urls, strict=True))],
                                "http://127.0.0.1:{http}")
        print(f"{shards} shard(s): {dict(zip(names, urls, strict=True))}, proxy {proxy.url}; seeding "
              f"{a.tenants} x {a.memories} memories through the proxy ...", flush=True)
        seeding = await asyncio.gather(*(seed_memories(proxy.url, a.memories, a.seed + j, parallel=1, api_key=k)
                                         for j, k in enumerate(keys)))
        counts = await placement(urls, keys)
        errs = placement_errors(counts, names, a.memories)
        if errs:
            # RuntimeError, no MemrigError branch: the rig's own proxy placed the tenants by its own shard map, so
            # a tenant found elsewhere (or not countable) means the rig's setup is wrong, not its input or a service
            raise RuntimeError("tenant placement: " + "; ".join(errs))
        seeded_s = round(time.monotonic() - t0, 1)
        cfg = DriverConfig(concurrency=a.concurrency, max_pending=a.max_pending, timeout_s=a.timeout_s,
                           validity=Validity(a.lag_threshold_ms))
        target = TenantRoutedTarget(urls, names, keys, a.concurrency, a.top_k, a.mode)
        await target.start()
        try:
            for i in range(len(keys) * len(target.queries)):  # every tenant's snapshot, every query's embedding
                await target.call(i)
            base = await idle_latency_ms(target)
            print(f"  seeded and placed in {seeded_s} s; rate search:", flush=True)
            start = a.start_rate * shards ** 0.5
            rs = await rate_search(target, a, cfg, base, start_rate=round(start, 1))
            await drain(target, base)
        finally:
            await target.close()
        per_shard = {n: sum(1 for k in keys if target.owner[k] == i) for i, n in enumerate(names)}
        return {"shards": shards, "urls": urls, "tenants_per_shard": per_shard, "placement": counts,
                "seeding": seeding, "idle_latency_ms": round(base, 3),
                "max_sustained_rps": rs["max_sustained_rps"], "first_failing_rps": rs["first_failing_rps"],
                "ended_by": rs["ended_by"], "ended_by_detail": rs["ended_by_detail"], "steps": rs["steps"],
                "seconds": round(time.monotonic() - t0, 1)}
    finally:
        rig.stop_all()


def render_markdown(result: dict[str, Any]) -> str:
    rounds = result["rounds"]
    one = next((r["max_sustained_rps"] for r in rounds if r["shards"] == 1), None)
    lines = [f"# Tenant shards: `{result['command']}`", "",
             f"{result['config']['tenants']} tenants x {result['config']['memories']} memories, "
             f"{result['config']['embedder']}, {result['config']['mode']} mode, top_k {result['config']['top_k']}, "
             f"p99 SLO {result['config']['slo_p99_ms']:g} ms; machine {result['machine'].get('cpu_count')} CPUs, "
             f"load average at start {result['machine'].get('loadavg_at_start')}, git {result['machine'].get('git_sha')}",
             "", "| shards | tenants per shard | max sustained retrieve req/s | ratio to 1 | ended by | seconds |",
             "|---:|---|---:|---:|---|---:|"]
    for r in rounds:
        rps = r["max_sustained_rps"]
        ratio = f"{rps / one:.2f}" if rps and one else "-"
        lines.append(f"| {r['shards']} | {', '.join(f'{k} {v}' for k, v in r['tenants_per_shard'].items())} | "
                     f"{rps if rps is not None else '-'} | {ratio} | {r['ended_by']} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


async def run(a: argparse.Namespace) -> dict[str, Any]:
    out = Path(a.out)
    result: dict[str, Any] = {"command": "python -m loadtests.shards " + " ".join(sys.argv[1:]),
                              "config": dict(vars(a)), "machine": machine_info(), "rounds": []}
    for s in a.shards:
        r = await one_round(a, s, out)
        result["rounds"].append(r)
        print(f"  {s} shard(s): {r['max_sustained_rps']} req/s ({r['ended_by']}), {r['seconds']} s", flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtests.shards", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (shards.json, shards.md)")
    ap.add_argument("--shards", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[1, 2, 4])
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--memories", type=int, default=500, help="memories per tenant")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--mode", choices=["fast", "full"], default="fast")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--slo-p99-ms", type=float, default=250.0)
    ap.add_argument("--start-rate", type=float, default=100.0, help="first step of the 1-shard climb (x sqrt(S))")
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--max-rate", type=float, default=20_000.0)
    ap.add_argument("--refine", type=int, default=1)
    ap.add_argument("--step-s", type=float, default=4.0)
    ap.add_argument("--pause-s", type=float, default=0.5)
    ap.add_argument("--arrival", choices=["constant", "poisson"], default="poisson")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-pending", type=int, default=2048)
    ap.add_argument("--timeout-s", type=float, default=10.0)
    ap.add_argument("--lag-threshold-ms", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not a.shards or min(a.shards) < 1:
        ap.error("--shards: one or more counts >= 1")
    if a.tenants < 1 or a.memories < 1:
        ap.error("--tenants and --memories must be >= 1")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = event_loop.run(run(a))
    (out / "shards.json").write_text(json.dumps(result, indent=2, default=str))
    md = render_markdown(result)
    (out / "shards.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
