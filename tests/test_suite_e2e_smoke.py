"""One end-to-end smoke run through the real runner: llm-mock and two control backends as processes."""

import json

import pytest

from services.coordinator.runner import RunConfig, run_suite


@pytest.mark.slow
async def test_octybot_through_runner(tmp_path):
    out = await run_suite(RunConfig(suite="octybot", backends=["full-context", "none"], out_dir=str(tmp_path / "run")))
    assert out.state == "succeeded", out.failures
    metrics = json.loads((out.run_dir / "metrics.json").read_text())
    assert metrics["conditions"]["full-context"]["overall"]["pass"]["mean"] == 1.0
    assert metrics["conditions"]["none"]["overall"]["pass"]["mean"] == 0.0
    assert (out.run_dir / "report.html").exists()
    assert "## Octybot" in (out.run_dir / "report.md").read_text()
