"""The report's real-peer comparison (mem0-oss beside mem0, http:cortex-mock beside cortex) and config section."""

from services.coordinator.report_peers import render_configs, render_peer_pairs


def test_pairs_found_by_condition_name_with_hand_computed_deltas():
    metrics = {"conditions": {
        "mem0": {"overall": {"recall@5": {"mean": 0.5}, "f1": {"mean": 0.25}, "only_here": {"mean": 1.0}}},
        "mem0-oss": {"overall": {"recall@5": {"mean": 0.75}, "f1": {"mean": 0.125}}},
        "compacted + mem0": {"overall": {"score": {"mean": 2.0}}},
        "compacted + mem0-oss": {"overall": {"score": {"mean": 1.5}}},
        "cortex": {"overall": {"hit": {"mean": 0.9}}},
        "mem0-raw": {"overall": {"recall@5": {"mean": 0.1}}},
    }}
    text = render_peer_pairs(metrics)
    assert "| recall@5 | 0.500 | 0.750 | 0.250 |" in text
    assert "| f1 | 0.250 | 0.125 | -0.125 |" in text and "only_here" not in text
    assert "**compacted + mem0-oss** beside **compacted + mem0**" in text and "| score | 2.000 | 1.500 | -0.500 |" in text
    assert "http:cortex-mock" not in text  # cortex has no peer in this run
    assert render_peer_pairs({"conditions": {"mem0": {"overall": {}}, "octybot": {"overall": {}}}}) == ""


def test_configs_list_every_describe_value():
    run = {"backends": {"mem0-oss": {"describe": {"name": "mem0-oss", "version": "mem0ai 2.2.1",
                                                  "config": {"infer": "auto", "mem0_config": {"version": "v1.1"}}}}}}
    text = render_configs(run)
    assert "**mem0-oss** — mem0-oss mem0ai 2.2.1" in text
    assert '"infer": "auto"' in text and '"version": "v1.1"' in text
