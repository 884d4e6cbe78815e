"""`make load-bench` reporting (issue 14): which rule ended a climb, the headline (best rate over the process
counts, its ratio to the generator's ceiling, the engine's one-core rate) and the report lines that show
them. Pure functions, hand-computed expectations; the run itself is `make load-bench`."""

from __future__ import annotations

from loadtests.bench import headline, render_markdown, stop_rule


def test_stop_rule_names_the_rule():
    assert stop_rule("invalid: schedule lag p99 42.3 ms > 20 ms") == "schedule lag"
    assert stop_rule("invalid: 12 arrivals dropped (in-flight bound hit)") == "dropped arrivals"
    assert stop_rule("invalid: 3 requests never finished") == "unfinished requests"
    assert stop_rule("4 failed requests ({'http_500': 4})") == "failed requests"
    assert stop_rule("corrected p99 312.5 ms >= 250 ms") == "p99"


def test_headline_picks_the_best_process_count_and_divides_by_the_ceiling():
    r = {"scaling": {"1": {"max_sustained_rps": 300.0}, "2": {"max_sustained_rps": 520.0},
                     "4": {"max_sustained_rps": 480.0}},
         "generator_ceiling": {"max_sustained_rps": 2600.0}, "engine_cost": {"one_core_rps": 400.0}}
    h = headline(r)
    assert h["best_rps"] == 520.0 and h["best_processes"] == 2
    assert h["ratio_to_generator"] == 0.2  # 520 / 2600
    assert h["ratio_to_engine_one_core"] == 1.3  # 520 / 400
    assert h["meets_target"] is False
    r["scaling"]["4"]["max_sustained_rps"] = 1040.0
    assert headline(r)["meets_target"] is True and headline(r)["best_processes"] == 4
    assert headline({"scaling": {"1": {"max_sustained_rps": None}}})["ratio_to_generator"] is None


def test_markdown_prints_ratio_scaling_and_the_rule():
    step = {"phase": "climb", "rate": 20, "ok": 19, "failed": 0, "dropped": 0, "achieved_rps": 19.5,
            "corrected": {"p50_ms": 5, "p99_ms": 9}, "service": {"p99_ms": 8}, "schedule_lag": {"p99_ms": 1},
            "pass": True, "why": "ok", "drain_s": 0.5}
    sc = {"max_sustained_rps": 20, "first_failing_rps": 30, "ended_by": "p99", "ended_by_detail": "corrected p99 300 ms"}
    r = {"config": {"embedder": "hash", "mode": "fast", "top_k": 10, "arrival": "poisson", "concurrency": 64,
                    "step_s": 1.0, "slo_p99_ms": 250.0, "start_rate": 20.0, "blas_threads": 0},
         "machine": {"cpu_count": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
         "seeding": {"total_memories": 100, "requested": 100, "seconds": 1, "batch": 250},
         "idle_latency_ms": {"direct": 2, "proxied": 3},
         "rate_search": {"max_sustained_rps": 20, "first_failing_rps": 30, "hit_max_rate": False, "steps": [step],
                         "ended_by": "p99", "ended_by_detail": "corrected p99 300 ms"},
         "scaling": {"1": sc, "2": {**sc, "max_sustained_rps": 40, "ended_by": "schedule lag"}},
         "generator_ceiling": {"max_sustained_rps": 800, "ended_by": "schedule lag"},
         "engine_cost": {"facts": 100, "mean_ms": 2.5, "p50_ms": 2, "p99_ms": 4, "one_core_rps": 400.0},
         "command": "python -m loadtests.bench"}
    r["headline"] = headline(r)
    md = render_markdown(r)
    assert "**Best sustained: 40 req/s** (2 process(es))" in md
    assert "**ratio 0.05**" in md  # 40 / 800
    assert "= 400.0 req/s on one core" in md
    assert "The climb ended by: **p99**" in md
    assert "| 2 | 40 | 30 | schedule lag: corrected p99 300 ms |" in md
