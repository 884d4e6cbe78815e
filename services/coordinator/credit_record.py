"""The recorded agreement of the credit rule that heads the verdict, for the reports.

`memrig credit-agreement --record` (services/coordinator/credit_agreement.py) writes the measurement beside the
labels (suites/data/credit_labels.agreement.json); the verdict page (verdict.py) prints it beside the headline.
Here so that the verdict reads it without importing the command, which imports the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.coordinator.metrics import budget

RECORD = Path(__file__).resolve().parent / "suites" / "data" / "credit_labels.agreement.json"


def headline_agreement(record: str | Path = RECORD) -> dict[str, Any] | None:
    """The recorded agreement of the rule that heads the verdict (for the reports): {rule, kappa_weighted, ci,
    items, labels_sha256}, or None when no measurement is recorded."""
    path = Path(record)
    if not path.exists():
        return None
    rec = json.loads(path.read_text())
    r = (rec.get("result") or {}).get("rules", {}).get(budget.HEADLINE_RULE) or {}
    if r.get("kappa_weighted") is None:
        return None
    return {"rule": budget.HEADLINE_RULE, "kappa_weighted": r["kappa_weighted"], "ci": r.get("ci"),
            "items": r.get("n"), "labels_sha256": rec.get("labels_sha256"), "command": rec.get("command")}


def headline_note(record: str | Path = RECORD) -> str:
    """One sentence for a report, beside the headline: the rule and its agreement with the blind labels."""
    a = headline_agreement(record)
    if a is None:
        return "decided by the rig from the injected text; the rule's agreement with blind labels is not measured " \
               "(memrig credit-agreement)."
    ci = a["ci"]
    cis = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return (f"decided by the rig from the injected text, by its `{a['rule']}` rule, which agrees with a blind reader's labels "
            f"at quadratic weighted kappa {a['kappa_weighted']:.2f}{cis} over {a['items']} items "
            "(`memrig credit-agreement`).")
