"""The drills against the real `cortex` adapter, the real cortex-mock and the real fault proxy (processes started
with services.launcher.Rig): all pass as configured, and each fails when the adapter is mis-configured on purpose."""

from __future__ import annotations

import asyncio

import pytest

from services.adapters.client import InProcessBackendClient
from services.cost_scenarios.scenarios import CORTEX_KNOBS_KW
from services.drills.base import AdapterKnobs, DrillConfig, DrillContext
from services.drills.catalog import DRILLS
from services.drills.runner import drills_markdown, run_drills, seed_memories
from services.fault_proxy.admin_client import FaultProxyAdmin
from services.launcher import Rig

pytestmark = pytest.mark.slow

CONFIG = DrillConfig(recall_timeout_ms=300, cooldown_s=0.6, outage_s=1.2, slow_api_ms=1500)
BROKEN = {
    "api_down": {"cold_start_window": 10 ** 6},  # gate disabled
    "slow_api": {"recall_timeout_ms": 10_000},  # timeout budget huge
    "sustained_failures": {"retry_queue_capacity": 10 ** 6},  # queue cap off
    "recovery": {"cold_start_cooldown_ms": 60_000},  # cooldown far past the outage
    "error_bursts": {"recall_timeout_ms": 10_000},
    "rate_limit_storm": {"retry_queue_capacity": 10 ** 6},
}


@pytest.fixture(scope="module")
def cortex_rig(tmp_path_factory):
    rig = Rig(tmp_path_factory.mktemp("run"))

    async def start():
        await rig.start_service("cortex-mock", extra=["--embedder", "hash"])
        return await rig.start_service("fault-proxy", extra=["--seed", "11"])

    try:
        proxy = asyncio.run(start())
    except Exception:
        rig.stop_all()
        raise
    try:
        yield proxy.url
    finally:
        rig.stop_all()


def _ctx(url, admin, overrides=None):
    def make(cfg):
        return InProcessBackendClient.from_spec("cortex", {"base_url": url, "mode": "query", **cfg})

    return DrillContext(admin, make, "drills-cortex", CONFIG, AdapterKnobs(**CORTEX_KNOBS_KW), overrides or {},
                        seed=11)


async def test_cortex_adapter_passes_every_drill(cortex_rig):
    async with FaultProxyAdmin(cortex_rig) as admin:
        results = await run_drills(_ctx(cortex_rig, admin))
    assert all(r.passed for r in results), drills_markdown(results)


@pytest.mark.parametrize("name", list(DRILLS))
async def test_cortex_drill_fails_when_misconfigured(cortex_rig, name):
    async with FaultProxyAdmin(cortex_rig) as admin:
        ctx = _ctx(cortex_rig, admin, BROKEN[name])
        await seed_memories(ctx)
        await admin.reset(seed=11)
        r = await DRILLS[name](ctx)
        await admin.reset(seed=11)
    assert not r.passed, r.measured
