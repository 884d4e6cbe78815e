"""`memrig judge-agreement`: every QA judge against a human-labelled set (services/coordinator/judge_agreement.py):
kappa with its interval, and the answers each judge missed."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from services.commands.common import llm_choices, llm_flags, state_dir
from services.common.types import ValidationError
from services.coordinator.plan import parse_csv
from services.launcher import Rig


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """`memrig judge-agreement`'s flags (services/common/subcommand.py)."""
    ap.add_argument("--labels", required=True, help="labels JSONL (services/coordinator/suites/data/"
                                                     "judge_labels_locomo.jsonl or judge_labels_beam.jsonl; format in "
                                                     "its .md)")
    ap.add_argument("--suite", choices=("locomo", "beam"), default="locomo",
                    help="locomo: the QA judges on LoCoMo answers; beam: BEAM's nugget judge (0 / 0.5 / 1 per "
                         "nugget) on BEAM answers (services/coordinator/beam_judge_agreement.py)")
    ap.add_argument("--nugget-mode", choices=("question", "nugget"), default=None,
                    help="--suite beam: one judge call per question listing its nuggets, or one per nugget "
                         "(default: judges.NUGGET_JUDGE_MODE)")
    ap.add_argument("--data", default=None, help="the data file the labels point into (default: "
                                                   "$MEMRIG_DATA_DIR or ../shared/data, locomo/locomo10_dev.json; "
                                                   "beam/beam_dev.json.gz with --suite beam)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ap.add_argument("--judges", default="0-3,binary", help="the model judges to run (0-3, binary; comma-separated)")
    ap.add_argument("--score-tokens", type=int, default=12,
                    help="cap the 0-3 judge's reply at this many tokens (its score comes first; greedy decoding "
                         "gives the same score; 0 = uncapped)")
    ap.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    ap.add_argument("--out", default=None, help="also write the Markdown to this file")
    ap.add_argument("--record", action="store_true",
                    help="write the agreement record beside the labels (<stem>.agreement.json), which suite reports "
                         "quote beside model-made QA figures")
    llm_flags(ap)


def labelled_items(args: argparse.Namespace, load, dataset: str, file_name: str) -> list:
    """The labels file's items joined with the dataset (--data, else the shared data's file); a missing file or a bad
    label line is an error naming its flag."""
    from services.coordinator.suites.common import resolve_data_file

    data_file = Path(args.data) if args.data else resolve_data_file(None, dataset, file_name)
    if not data_file.exists():
        raise FileNotFoundError(f"--data: {data_file} not found")
    try:
        return load(args.labels, data_file)
    except ValueError as e:
        raise ValidationError("--labels", str(e)) from None


def run(args: argparse.Namespace) -> int:
    from services.common import llm_roles
    from services.coordinator import judge_agreement as JA
    from services.coordinator.results import git_sha

    if args.suite == "beam":
        return run_beam(args)
    items = labelled_items(args, JA.load_labels, "locomo", "locomo10_dev.json")
    choices = llm_choices(args)
    choices = {"judge": choices["judge"]} if choices else {}
    judges = parse_csv(args.judges)
    for j in judges:
        if j not in JA.MODEL_JUDGES:
            raise ValidationError("--judges", f"{j!r} is not a model judge; expected {', '.join(JA.MODEL_JUDGES)}")
    if args.record and set(judges) != set(JA.MODEL_JUDGES):
        raise ValidationError("--record", "a record needs both model judges (--judges 0-3,binary)")

    async def go():
        from services.common.llm_client import LLMClient

        rig = Rig(state_dir() / "judge-agreement")
        try:
            roles = await rig.ensure_llm_roles(choices)
            async with LLMClient(roles["judge"]) as client:
                res, raw = await JA.measure(items, client, seed=args.seed, judges=judges,
                                            score_tokens=args.score_tokens or None)
                return res, raw, roles["judge"].identity(), client.cache_stats()
        finally:
            rig.stop_all()

    res, raw, ident, cache = asyncio.run(go())
    digest = JA.labels_digest(args.labels)
    name = llm_roles.short_name(ident)
    command = "memrig judge-agreement --labels " + JA._rel(args.labels) + (f" --judge {choices['judge']}" if choices
                                                                         else "")
    text = JA.render_labels(res, name, JA._rel(args.labels), digest, items)
    text += f"\n\nModel calls: {cache['hits']} from the response cache, {cache['misses']} answered by the model."
    if args.json:
        print(json.dumps({"result": res, "model_raw": raw, "judge": ident, "labels_sha256": digest}, indent=1))
    else:
        print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.record:
        rec = JA.make_record(res, JA._rel(args.labels), digest, ident, git_sha(), command)
        path = JA.record_path(args.labels)
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        print(f"\nrecorded: {path}", file=sys.stderr)
    return 0


def run_beam(args: argparse.Namespace) -> int:
    """`--suite beam`: the nugget judge and the offline term rule against the reader's nugget labels."""
    from services.common import llm_roles, prompts
    from services.coordinator import beam_judge_agreement as BJ
    from services.coordinator import judges
    from services.coordinator.judge_agreement import JudgeSettings, _rel
    from services.coordinator.results import git_sha

    items = labelled_items(args, BJ.load_labels, "beam", "beam_dev.json.gz")
    mode = args.nugget_mode or judges.NUGGET_JUDGE_MODE
    choices = llm_choices(args)
    choices = {"judge": choices["judge"]} if choices else {}

    async def go():
        from services.common.llm_client import LLMClient

        rig = Rig(state_dir() / "judge-agreement")
        try:
            roles = await rig.ensure_llm_roles(choices)
            async with LLMClient(roles["judge"]) as client:
                scores, raw = await BJ.model_scores(items, JudgeSettings(client), mode)
                return scores, raw, roles["judge"].identity(), client.cache_stats()
        finally:
            rig.stop_all()

    scores, raw, ident, cache = asyncio.run(go())
    results = {"model nugget judge": BJ.agreement(items, scores, seed=args.seed),
               "offline term rule": BJ.agreement(items, BJ.offline_scores(items), seed=args.seed)}
    digest = BJ.labels_digest(args.labels)
    text = BJ.render(results, llm_roles.short_name(ident), _rel(args.labels), digest, mode)
    text += f"\n\nModel calls: {cache['hits']} from the response cache, {cache['misses']} answered by the model."
    if args.json:
        print(json.dumps({"result": results, "model_scores": scores, "model_raw": raw, "judge": ident,
                          "labels_sha256": digest, "mode": mode}, indent=1))
    else:
        print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.record:
        prompt = judges.NUGGET_JUDGE_PROMPT[mode]
        rec = {"labels": _rel(args.labels), "labels_sha256": digest, "mode": mode, "prompt": prompt,
               "prompt_id": judges.prompt_id(getattr(prompts, prompt)),
               "judge_model": {k: ident.get(k) for k in ("model", "quantization", "sha256") if ident.get(k)},
               "commit": git_sha(), "command": f"memrig judge-agreement --suite beam --labels {_rel(args.labels)}"
               + (f" --judge {choices['judge']}" if choices else "") + f" --nugget-mode {mode}",
               "results": results}
        path = Path(args.labels).with_name(Path(args.labels).stem + ".agreement.json")
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        print(f"\nrecorded: {path}", file=sys.stderr)
    return 0
