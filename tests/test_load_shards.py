"""loadtests/shards.py's own rules (the measurement itself is `make load-bench-shards`): a tenant must be whole on the
shard `shard_owner` names and absent from the others, and the generator sends each tenant's requests to that shard."""

from __future__ import annotations

from loadtests.shards import TenantRoutedTarget, placement_errors, tenant_keys
from services.fault_proxy.shards import shard_owner


def test_placement_errors_name_the_tenant_and_the_shard():
    names = ["s0", "s1", "s2", "s3"]
    # owners by hand (tests/test_fault_proxy_shards.py): tenant-a -> s0, tenant-b -> s1
    assert placement_errors({"tenant-a": [5, 0, 0, 0], "tenant-b": [0, 5, 0, 0]}, names, 5) == []
    assert placement_errors({"tenant-a": [3, 2, 0, None]}, names, 5) == [
        "tenant-a: 3 memories on shard s0, expected 5 (owner s0)",
        "tenant-a: 2 memories on shard s1, expected 0 (owner s0)",
        "tenant-a: None memories on shard s3, expected 0 (owner s0)"]


def test_the_generator_routes_each_tenant_to_its_owner():
    keys = tenant_keys(8)
    assert keys[:2] == ["memrig-shard-tenant-0", "memrig-shard-tenant-1"]
    names, urls = ["s0", "s1"], ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    t = TenantRoutedTarget(urls, names, keys, concurrency=4, top_k=10, mode="fast")
    assert [x.base_url for x in t.targets] == [urls[shard_owner(k, names)] for k in keys]
    assert [x.api_key for x in t.targets] == keys
    assert sorted(t.owner.values()).count(0) == 4  # 8 keys over 2 shards: 4 and 4 (the run's table)
