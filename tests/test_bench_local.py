"""bench-local: the profile's backends (OpenClaw's port standing in when OpenClaw cannot run), refusals naming the
reason, the index report (model, cache, rerun comparison), and the CLI's role flags."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from services.adapters.registry import get_spec
from services.coordinator import bench_local as B


def test_openclaw_real_falls_back_to_its_port_with_the_same_profile(monkeypatch):
    def fake_spec(name):
        spec = get_spec(name)
        if name.startswith("openclaw-real"):
            return replace(spec, available=lambda: (False, "Node packages not installed"))
        return spec

    monkeypatch.setattr(B, "get_spec", fake_spec)
    got, notes = B.profile_backends(["none", "openclaw-real", "openclaw-real[profile=flush-every-session]", "bm25",
                                     "openclaw-real[profile=sessions]"])
    assert got == ["none", "openclaw", "openclaw[profile=flush-every-session]", "bm25"]
    assert notes == {"openclaw-real": "replaced by openclaw: Node packages not installed",
                     "openclaw-real[profile=flush-every-session]":
                         "replaced by openclaw[profile=flush-every-session]: Node packages not installed",
                     # the port indexes no transcripts: no stand-in for the profile that searches them
                     "openclaw-real[profile=sessions]": "skipped: Node packages not installed"}


def test_profile_covers_the_issue_sizes():
    assert B.PROFILE["cortex-v1"]["options"] == {}  # all 40 prompts
    assert len(B.PROFILE["cortex-v1"]["backends"]) == 7
    assert B.PROFILE["locomo"]["options"]["judge"] is True
    for name in ("locomo", "longmemeval"):  # the verdict's two references and native's strongest LoCoMo profile
        assert {"bm25", "openclaw-real", "openclaw-real[profile=sessions]"} <= set(B.PROFILE[name]["backends"])
    assert set(B.LOCAL_ROLES.values()) == {"local"} and set(B.LOCAL_ROLES) == {"answerer", "judge", "flush", "compaction"}


def _exit_code(argv: list[str]) -> int:
    from services.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_refusals_name_the_reason(tmp_path, capsys):
    assert _exit_code(["bench-local", "--suites", "madial", "--out", str(tmp_path / "o")]) == 2
    assert "--suites: madial not in the profile" in capsys.readouterr().err
    # The test environment's cache directory has no model: the reason and the command to run.
    assert _exit_code(["bench-local", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "the local model is not set up" in err and "make setup-local-llm" in err
    assert not (tmp_path / "o").exists()


def test_index_report_names_model_cache_and_rerun(tmp_path: Path):
    (tmp_path / "cortex-v1").mkdir()
    (tmp_path / "cortex-v1" / "report.md").write_text("# memrig report: cortex-v1\n\n## Cortex V1: condition\n\nrows\n")
    index = {
        "run_id": "bl", "git_sha": "abc", "machine": {"cores": 2}, "duration_s": 61.2,
        "model": {"name": "Qwen2.5-Coder-1.5B-Instruct", "quantization": "Q4_K_M", "file": "q.gguf",
                  "sha256": "cc324af0", "licence": "Apache-2.0", "source": "Qwen/X", "runtime": "llama-cpp-python 0.3.36",
                  "n_ctx": 8192, "threads": 2},
        "llm_cache": {"hits": 300, "new_entries": 0},
        "suites": {
            "cortex-v1": {"state": "succeeded", "backends": ["none", "bm25"], "duration_s": 40.0, "dir": "cortex-v1",
                          "llm_cache": {"hits": 290, "new_entries": 0}, "compare_with": "results/a",
                          "differences": [], "backend_notes": {"openclaw-real": "replaced by openclaw: no Node"}},
            "locomo": {"state": "skipped", "reason": "data not found", "llm_cache": {"hits": 0, "new_entries": 0},
                       "compare_with": "results/a", "differences": ["metrics.x: 1 != 2"]},
        },
    }
    md = B.render(tmp_path, index)
    assert "**Qwen2.5-Coder-1.5B-Instruct Q4_K_M** (`q.gguf`, SHA-256 `cc324af0`" in md
    assert "Response cache: 300 call(s) answered from the cache, 0 made by the model" in md
    assert "| cortex-v1 | succeeded | none, bm25 | 40 s | 290 / 0 | identical to `results/a` | [cortex-v1/report.md]" in md
    assert "| locomo | skipped |  | 0 s | 0 / 0 | 1 difference(s): metrics.x: 1 != 2 | data not found |" in md
    assert "> cortex-v1: backend **openclaw-real** replaced by openclaw: no Node" in md
    assert "\n# cortex-v1\n" in md and "### Cortex V1: condition" in md


def test_cli_role_flags(monkeypatch):
    from services import cli
    from services.commands.common import llm_choices
    from services.common.types import ValidationError

    args = cli.build_parser().parse_args(["bench", "--suite", "cortex-v1", "--llm", "local", "--judge", "mock",
                                          "--no-llm-cache"])
    monkeypatch.setenv("MEMRIG_LLM_CACHE", "on")  # recorded, so the 'refresh' written below is undone
    assert llm_choices(args) == {"answerer": "local", "judge": "mock", "flush": "local", "compaction": "local"}
    import os

    assert os.environ["MEMRIG_LLM_CACHE"] == "refresh"
    args = cli.build_parser().parse_args(["bench", "--suite", "cortex-v1"])
    assert llm_choices(args) == {}
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["bench", "--suite", "cortex-v1", "--flush", "gpt"])
    args.llm = "remote"  # past argparse (e.g. a RunConfig built by hand): the flag is named
    with pytest.raises(ValidationError, match="--llm"):
        llm_choices(args)


def test_bench_all_says_why_the_local_profile_is_not_in_it(tmp_path):
    from services.coordinator.bench_all import _local_llm_note
    from services.coordinator.run_report import render_index

    note = _local_llm_note()  # the test environment's cache directory holds no model
    assert note.startswith("not part of bench-all, and the local model is not set up") and "make setup-local-llm" in note
    md = render_index(tmp_path, {"run_id": "r", "backends": ["bm25"], "suites": {}, "local_llm": note})
    assert f"> Local-model profile (answers, judgements, flush notes by a real model) skipped: {note}" in md


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
def test_the_report_opens_with_the_verdict_on_the_models_answers(tmp_path: Path):
    from tests.run_fixtures import madial_run
    from tests.test_verdict import cortex_run

    model = {"model": "qwen-q4", "base_url": "http://127.0.0.1:1/v1", "offline_mock": False}
    cortex_run(tmp_path / "cortex-v1", llm=model, judge=model)
    madial_run(tmp_path / "madial", {"openclaw-real": {0, 1}, "bm25": {0}, "mine": set(range(10))}, llm=model,
               judge=model)
    index = {"run_id": "bl", "git_sha": "abc", "machine": {"cores": 2}, "duration_s": 1.0, "model": {},
             "llm_cache": {"hits": 0, "new_entries": 0},
             "suites": {n: {"state": "succeeded", "backends": [], "duration_s": 1.0, "dir": n,
                            "llm_cache": {"hits": 0, "new_entries": 0}} for n in ("cortex-v1", "madial")}}
    verdict, vmd = B.write_verdict(tmp_path, index)
    md = B.render(tmp_path, index, vmd)
    lines = md.split("\n")
    assert lines[0] == "# Verdict (bl)" and md.index("# memrig bench-local (bl)") > md.index("| **mine** |")
    # cortex_run's judge scores: 3 on a hit, 1 otherwise; mine hits 8/8 (3.00), native 4/8 (2.00): +1.00 on 4
    # probes of 8, p = 2/16 by sign flips over questions: no word; MADial's recall@5 10/10 vs 2/10 is better
    row = next(x for x in lines if x.startswith("| **mine** |"))
    head = lines[lines.index(row) - 2]
    assert "judge 0-3 vs OpenClaw native" in head and "[madial](#madial): shown @1,000 tokens vs OpenClaw native" in head
    assert "[could not detect a difference below 1.23](#cortex-v1) +1.00 [" in row and "[better](#madial) +80.0 [" in row
    assert verdict["suites"]["cortex-v1"]["headline"]["metric"] == "judge_score"
    assert verdict["summary"]["mine"]["vs_native"]["better"] == ["madial"]
    # only the suite whose headline the model made is named: MADial's is retrieval
    assert "> **Answers by `qwen-q4`, judged by `qwen-q4`:** the headline of cortex-v1 is the model's answer quality." \
        in lines
    # the suite's own verdict is not repeated in its section below
    assert sum(1 for x in lines if x.lstrip("#").strip() == "Verdict" or x.startswith("# Verdict")) == 1
    assert md.count("- **Answer model:** `qwen-q4`") == 2  # each suite section keeps its header
    assert "end of verdict" not in md
    assert (tmp_path / "verdict.json").exists()
