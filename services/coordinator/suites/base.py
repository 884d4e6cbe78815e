"""What a quality suite is: a loader (corpora to ingest), probes (questions with ground truth), conditions
(which context each answer gets), a per-probe runner and a scorer. Registered by name in `registry.py`.

The coordinator owns processes, concurrency, resume and files; a suite owns only its data and its maths.
Raw samples come first (one JSON object per probe × condition in samples.jsonl) and `score` recomputes every
metric from them, so a run can be re-scored without re-running anything.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from services.common.errors import DependencyError, InputError
from services.common.types import IngestBatch
from services.coordinator.metrics.registry import direction
from services.coordinator.suites.probe import Condition, Probe

if TYPE_CHECKING:
    from services.coordinator.context import ProbeContext


class OptionError(InputError):
    """A suite option that is unknown or of the wrong type; `option` names it, `field` is `options.<option>` (the
    gRPC edge answers INVALID_ARGUMENT with it before a run starts)."""

    def __init__(self, option: str, message: str):
        super().__init__(f"options.{option}", message)
        self.option = option


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def coerce_option(name: str, default: Any, value: Any) -> Any:
    """`value` converted to the type of the option's default (CLI values arrive as JSON or text, gRPC Struct
    numbers as floats), or OptionError naming the option. A default of None accepts anything."""
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise OptionError(name, f"expected true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool):
            raise OptionError(name, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise OptionError(name, f"expected an integer, got {value!r}")
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise OptionError(name, f"expected a number, got {value!r}")
    if isinstance(default, str):
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)  # `categories=12` parses as JSON 12 on the command line; it means "12"
        raise OptionError(name, f"expected a string, got {value!r}")
    if isinstance(default, (list, dict)) and not isinstance(value, type(default)):
        raise OptionError(name, f"expected a {type(default).__name__}, got {value!r}")
    return value


class SuiteUnavailable(DependencyError):
    """Raised by `load` when a suite cannot run here (e.g. its real data set is absent); bench-all skips it
    and the report says why."""

    dependency = "the suite's data"


@dataclass
class SuiteData:
    corpora: dict[str, IngestBatch]  # namespace -> what to ingest
    probes: list[Probe]
    info: dict[str, Any] = field(default_factory=dict)  # sizes, sources, licences, repairs...


@dataclass
class ProbeValues:
    """Per-probe metric values, the raw material of every interval and paired test a suite reports:
    `values[condition][metric][probe_id]` (None = the metric does not apply to that probe). `clusters` maps a
    probe to its independent unit when probes are not independent (LoCoMo: the conversation), `specs` gives each
    metric's (higher_is_better, unit) for stats.compare, and `tokens` / `latency` name the metrics holding the
    context tokens injected per turn and the client-observed retrieve latency."""

    values: dict[str, dict[str, dict[str, float | None]]]
    specs: dict[str, tuple[bool, str]] = field(default_factory=dict)
    clusters: dict[str, str] | None = None
    cluster_unit: str = "conversation"
    tokens: str = "token_spend"
    latency: str = "latency_ms"
    # condition -> the backend it measures (the last backend in its context); filled from the samples
    backend_of: dict[str, str] = field(default_factory=dict)

    def spec(self, metric: str) -> tuple[bool, str]:
        """(higher_is_better, unit): metrics.registry.direction, the one source of a metric's direction (this suite's
        `specs` only declare what the registry does not hold; a contradiction or an unknown name is an error)."""
        return direction(metric, self.specs)


def condition_backends(samples: list[dict[str, Any]]) -> dict[str, str]:
    """condition -> the backend whose retrieval it measures: the last `backend:` block of its context (a condition
    with none, e.g. compaction alone, is left out)."""
    out: dict[str, str] = {}
    for s in samples:
        blocks = [c.split(":", 1)[1] for c in s.get("condition_context") or [] if c.startswith("backend:")]
        if blocks and s["condition"] not in out:
            out[s["condition"]] = blocks[-1]
    return out


class Suite(abc.ABC):
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Options with their defaults; everything a run may change. Resolved values land in run.json.
    defaults: ClassVar[dict[str, Any]] = {}
    # The metric the verdict page judges a backend by (a name in per_probe's values): `answer_headline` when a real
    # model answered (and judged), `retrieval_headline` when the answers came from the offline llm-mock, whose QA
    # figures measure the mock as much as the memory. None: the suite has no headline of that kind.
    retrieval_headline: ClassVar[str | None] = None
    answer_headline: ClassVar[str | None] = None
    # Metrics computed from the answering model's replies ("answer") or the judge's verdicts ("judge"): marked as
    # llm-mock figures when the mock produced them.
    answer_metrics: ClassVar[dict[str, str]] = {}
    # True when every probe reads only its own namespace on one backend (LongMemEval: a haystack per question): the
    # runner then takes each backend one namespace at a time (ingest, that namespace's probes, release), so a run's
    # memory stays bounded and its cost per message can be read as it grows (services/coordinator/costs.py).
    namespace_scoped: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None, seed: int = 0):
        unknown = sorted(set(options or {}) - set(self.defaults))
        if unknown:
            raise OptionError(unknown[0], f"suite {self.name}: unknown option(s) {unknown}; known: "
                              f"{sorted(self.defaults)}")
        given = {k: coerce_option(k, self.defaults[k], v) for k, v in (options or {}).items()}
        self.options = {**self.defaults, **given}
        self.seed = seed

    @abc.abstractmethod
    def load(self) -> SuiteData:
        """Build (deterministically, from `seed` and `options`) the corpora and probes."""

    @abc.abstractmethod
    def conditions(self, backends: list[str], capabilities: dict[str, dict[str, str]]) -> list[Condition]:
        """The conditions to run for these backends (`capabilities[backend]` = {capability: detail})."""

    def namespaces_for(self, backend: str, capabilities: dict[str, str], corpora: dict[str, IngestBatch]) -> list[str]:
        """Which corpora this backend needs ingested (default: all). A suite that delivers the same data in two
        forms (facts vs journals) ingests only the form each backend reads."""
        return list(corpora)

    def retrieve_top_k(self, backend: str) -> int:
        return int(self.options.get("top_k", 6))

    def retrieve_mode(self, backend: str) -> str:
        return str(self.options.get("mode", "fast"))

    async def run_probe(self, ctx: ProbeContext, probe: Probe, condition: Condition) -> dict[str, Any]:
        """Default: gather the context blocks, answer with the LLM, judge 0-3. Returns the sample body."""
        return await ctx.answer_and_judge(probe, condition)

    @abc.abstractmethod
    def score(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        """All metrics, from samples alone."""

    @abc.abstractmethod
    def render(self, metrics: dict[str, Any]) -> str:
        """The suite's section of report.md (Markdown)."""

    def per_probe(self, samples: list[dict[str, Any]]) -> ProbeValues:
        """Every per-probe metric value by condition, from samples alone (what `score` builds its intervals and
        paired tests from; the verdict page and `memrig compare` test differences with them)."""
        raise NotImplementedError(f"suite {self.name} does not expose per-probe values")

    def probe_values(self, samples: list[dict[str, Any]]) -> ProbeValues:
        """`per_probe(samples)`, computed once per sample list: a run's scoring, its verdict and its power table read
        the same object instead of recomputing it (the list is compared by identity, not by content)."""
        cached = getattr(self, "_probe_values", None)
        if cached is None or cached[0] is not samples:
            self._probe_values = (samples, self.per_probe(samples))
        return self._probe_values[1]

    def headline(self, answers_mocked: bool, judge_mocked: bool) -> str | None:
        """The verdict's metric for this run: the answer headline only when neither the answers nor (for a judged
        headline) the judge came from llm-mock."""
        ans = self.answer_headline
        if ans and not answers_mocked and not (self.answer_metrics.get(ans) == "judge" and judge_mocked):
            return ans
        return self.retrieval_headline or ans

    def more_units(self, data: dict[str, Any]) -> tuple[str, int] | None:
        """(the option that gives this suite the most independent units its data holds, that many units), from
        run.json's `data`; None when the suite's unit is the question (it has no clustered unit to add)."""
        return None

    def cost_groups(self, data: dict[str, Any]) -> tuple[str, dict[str, str], tuple[str, ...]] | None:
        """(what the groups are called, {namespace: group}, the groups in order) when the suite's namespaces come in
        sizes whose cost is worth a table of its own (services/coordinator/costs.py `group_table`), from run.json's
        `data`; None (the default) otherwise."""
        return None

    def mocked_metrics(self, answers_mocked: bool, judge_mocked: bool) -> set[str]:
        """The metrics whose values the offline llm-mock produced in this run."""
        return {m for m, kind in self.answer_metrics.items()
                if answers_mocked or (kind == "judge" and judge_mocked)}
