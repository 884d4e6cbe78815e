"""Fact extraction: conversation or text -> facts with entities, attributes, switches and questions.

The offline extractor is deterministic: sentence split, filtering (questions, filler, fragments), entity
detection (capitalised terms, acronyms, code tokens, known tool names), a fact type from cue words, an
attribute/value pair for supersession ("the cache TTL is 300s" -> ("cache ttl", "300s")), explicit switches
("migrated from MySQL to Postgres"), and occurred_at from date phrases resolved against the message time.
`llm_extract` asks an LLM (prompts.FACT_EXTRACTION_SYSTEM) for the fact lines and runs the same analysis on
each line, so both extractors yield the same structure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from services.cortex_mock.temporal import MONTHS, WEEKDAYS, resolve_occurred_at
from services.cortex_mock.text import STOPWORDS, content_tokens, split_sentences, tokenize

# Canonical display names of common developer tools; keys are lower-case surface forms.
TOOLS: dict[str, str] = {}
for _canon, _forms in {
    "Redis": "redis", "Postgres": "postgres postgresql psql", "MySQL": "mysql", "SQLite": "sqlite sqlite3",
    "MongoDB": "mongodb mongo", "Docker": "docker", "Kubernetes": "kubernetes k8s", "Helm": "helm",
    "Terraform": "terraform", "Ansible": "ansible", "Nginx": "nginx", "Python": "python", "Node": "node node.js nodejs",
    "TypeScript": "typescript", "JavaScript": "javascript", "React": "react", "Vue": "vue", "Rust": "rust",
    "Java": "java", "Kafka": "kafka", "RabbitMQ": "rabbitmq", "Grafana": "grafana", "Prometheus": "prometheus",
    "GitHub": "github", "GitLab": "gitlab", "Git": "git", "AWS": "aws", "GCP": "gcp", "Azure": "azure",
    "Lambda": "lambda", "S3": "s3", "ECS": "ecs", "Fargate": "fargate", "RDS": "rds", "pgvector": "pgvector",
    "FastAPI": "fastapi", "Django": "django", "Flask": "flask", "Express": "express", "Next.js": "next.js nextjs",
    "Vite": "vite", "Webpack": "webpack", "Jest": "jest", "pytest": "pytest", "Vitest": "vitest", "npm": "npm",
    "pnpm": "pnpm", "Yarn": "yarn", "Bun": "bun", "Deno": "deno", "Celery": "celery",
    "Elasticsearch": "elasticsearch", "OpenSearch": "opensearch", "OpenAI": "openai", "Claude": "claude",
    "Sentry": "sentry", "Datadog": "datadog", "Jenkins": "jenkins", "CircleCI": "circleci", "Vercel": "vercel",
    "Netlify": "netlify", "Cloudflare": "cloudflare", "Supabase": "supabase", "Firebase": "firebase",
    "Stripe": "stripe", "Slack": "slack", "Jira": "jira", "Linear": "linear", "OpenClaw": "openclaw",
    "Cortex": "cortex", "Mem0": "mem0", "Locust": "locust", "GraphQL": "graphql", "gRPC": "grpc", "JWT": "jwt",
    "OAuth": "oauth", "Tailwind": "tailwind tailwindcss", "Prisma": "prisma", "SQLAlchemy": "sqlalchemy",
    "Alembic": "alembic", "pandas": "pandas", "NumPy": "numpy", "PyTorch": "pytorch torch",
    "Memcached": "memcached", "Varnish": "varnish", "VS Code": "vscode", "Bazel": "bazel", "Poetry": "poetry",
    "Ruff": "ruff", "ESLint": "eslint", "Prettier": "prettier", "mypy": "mypy", "Playwright": "playwright",
    "Cypress": "cypress", "Storybook": "storybook", "Airflow": "airflow", "Spark": "spark", "Snowflake": "snowflake",
    "BigQuery": "bigquery", "DynamoDB": "dynamodb", "Cassandra": "cassandra", "Traefik": "traefik",
    "Caddy": "caddy", "HAProxy": "haproxy", "Envoy": "envoy", "Istio": "istio", "ArgoCD": "argocd argo",
}.items():
    for _f in _forms.split():
        TOOLS[_f] = _canon

_TOOL_RE = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(TOOLS, key=len, reverse=True)) + r")(?![\w])",
                      re.I)
_BACKTICK_RE = re.compile(r"`([^`\n]{1,80})`")
_PATH_RE = re.compile(r"(?<![\w/])((?:[\w.-]+/)*[\w-]+\.(?:py|ts|tsx|js|jsx|json|ya?ml|md|toml|sql|go|rs|sh|css|html|"
                      r"env|txt|lock|proto|ini|cfg|conf))\b")
_IDENT_RE = re.compile(r"\b([a-z][a-z0-9]*_[a-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]+|[A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
_FLAG_RE = re.compile(r"(?<!\w)(--[a-z][a-z0-9-]+)")
_CAP_SEQ_RE = re.compile(r"\b([A-Z][a-zA-Z0-9]*(?:[\s-][A-Z][a-zA-Z0-9]*)*)\b")
_ACRONYM_RE = re.compile(r"\b([A-Z]{2,6})s?\b")
_NOT_ENTITY = STOPWORDS | set(MONTHS) | set(WEEKDAYS) | {
    "i", "i'm", "im", "ok", "okay", "we'll", "let's", "great", "good", "sounds", "perfect", "also", "now", "next",
    "first", "finally", "actually", "because", "since", "after", "before", "then", "maybe", "yes", "no", "sure",
    "thanks", "today", "yesterday", "tomorrow", "user", "assistant", "note", "update", "done", "agreed", "right",
    "well", "so", "but", "and", "or", "however", "instead", "currently", "earlier", "later",
}

_DECISION_RE = re.compile(r"\b(decided|decide|decision|chose|choose|chosen|going with|go with|we'll use|we will use|"
                          r"switch(?:ed)?|instead of|migrat(?:e|ed|ing)|moved to|settled on|picked|opted|adopt(?:ed)?|"
                          r"agreed|replac(?:e|ed)|standardi[sz]ed on)\b")
_PREFERENCE_RE = re.compile(r"\b(prefer|prefers|preferred|preference|i like|we like|likes|love|hate|dislike|always|"
                            r"never|favou?rite|rather)\b")
_EVENT_RE = re.compile(r"\b(deployed|released|shipped|fixed|broke|broken|happened|launched|merged|upgraded|"
                       r"rolled back|incident|outage|crashed|failed|resolved|debugged|found)\b")
_PLAN_RE = re.compile(r"\b(will|going to|plan|planning|next step|todo|to-do|need to|needs to|should)\b")
_FILLER_RE = re.compile(r"^(thanks|thank you|great|sounds good|ok|okay|sure|hi|hello|hey|got it|no problem|"
                        r"perfect|cool|nice|awesome|will do|understood|yes|yeah|right)\b", re.I)
_NEGATORS = frozenset({"not", "no", "never", "don't", "dont", "doesn't", "doesnt", "isn't", "isnt", "won't",
                       "wont", "aren't", "arent", "didn't", "didnt", "without", "disabled", "n't"})

_VALUE = r"(?P<val>[\w.\-/:%+$]+(?:\s?(?:s|ms|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|mb|gb|kb|tb|%|" \
         r"percent|requests?|rps|qps|workers?|replicas?|nodes?|threads?|connections?))?)"
_SET_RE = re.compile(r"\b(?:set|changed?|bump(?:ed)?|raised?|lowered|increased?|reduced?|updated?|configured?)\s+"
                     r"(?P<subj>[\w\s.\-']{2,48}?)\s+(?:to|=)\s+" + _VALUE)
_COPULA_RE = re.compile(r"(?P<subj>[\w\s.\-']{2,48}?)\s+(?:is now|is set to|is still|is|are now|are|was|were|"
                        r"should be|will be|defaults to|=|:)\s+" + _VALUE)
# A copula standing between whitespace, as every _COPULA_RE match has one: that regex's lazy subject is tried at
# every start position (about 0.4 ms over a 45-word sentence), so extract_attribute only runs it where this
# cheaper search finds one (the same matches: it is a necessary condition).
_COPULA_WORD_RE = re.compile(r"\s(?:is|are|was|were|should be|will be|defaults to|=|:)\s")
_TERM = r"[\w.\-/+]+(?:\s[A-Z][\w.\-/+]*)?"  # one word, or two when the second is capitalised ("Redis Cluster")
_SWITCH_RE = re.compile(r"\b(?i:switch(?:ed)?|migrat(?:e|ed)|mov(?:e|ed)|chang(?:e|ed)|went|swap(?:ped)?|"
                        r"transition(?:ed)?|upgrad(?:e|ed)|port(?:ed)?)\b(?:\s+[\w.'-]+){0,4}?\s+(?i:from)\s+"
                        rf"(?P<old>{_TERM})\s+(?i:to)\s+(?P<new>{_TERM})")
_REPLACE_RE = re.compile(rf"\b(?i:replac(?:e|ed|ing))\s+(?P<old>{_TERM})\s+(?i:with)\s+(?P<new>{_TERM})")
_INSTEAD_RE = re.compile(r"\b(?P<new>[\w.\-/+]+)\s+(?i:instead\s+of)\s+(?P<old>[\w.\-/+]+)")
_NO_LONGER_RE = re.compile(r"\b(?i:no longer|not anymore|stopped|stop|dropped|removed|deprecated)\s+"
                           r"(?:(?i:using|use)\s+)?(?P<old>[\w.\-/+]+)")
_DURATION_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "ms": 0.001, "min": 60, "mins": 60,
                   "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
                   "day": 86400, "days": 86400}
_VALUE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z%]*)$")


@dataclass
class Entity:
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.name.lower()


@dataclass
class ExtractedFact:
    core: str
    fact_type: str
    speaker: str
    occurred_at: datetime
    entities: list[Entity]
    attr_key: str = ""
    attr_value: str = ""
    switch_from: str = ""
    switch_to: str = ""
    negated: bool = False
    questions: list[str] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)

    @property
    def entity_refs(self) -> list[str]:
        return [e.name for e in self.entities]


def detect_entities(sentence: str) -> list[Entity]:
    """Entities in order of first appearance, de-duplicated by lower-case name."""
    found: list[tuple[int, Entity]] = []
    taken: list[tuple[int, int]] = []

    def add(pos: int, end: int, name: str, etype: str, surface: str | None = None) -> None:
        name = name.strip(" .,;:'\"")
        if len(name) < 2 or name.lower() in _NOT_ENTITY:
            return
        aliases = [surface] if surface and surface != name else []
        found.append((pos, Entity(name, etype, aliases)))
        taken.append((pos, end))

    def overlaps(s: int, e: int) -> bool:
        return any(s < te and ts < e for ts, te in taken)

    for m in _BACKTICK_RE.finditer(sentence):
        add(m.start(1), m.end(1), m.group(1), "code")
    for rx in (_PATH_RE, _FLAG_RE, _IDENT_RE):
        for m in rx.finditer(sentence):
            if not overlaps(m.start(1), m.end(1)):
                add(m.start(1), m.end(1), m.group(1), "code")
    for m in _TOOL_RE.finditer(sentence):
        if not overlaps(m.start(1), m.end(1)):
            surface = m.group(1)
            add(m.start(1), m.end(1), TOOLS[surface.lower()], "tool", surface)
    for m in _CAP_SEQ_RE.finditer(sentence):
        s, e = m.start(1), m.end(1)
        words = m.group(1).split()
        # Sentence-initial capitals are grammar, not names, unless the word looks like a name (CamelCase,
        # digits) or more capitalised words follow.
        at_start = sentence[:s].strip(" \"'([*-") == ""
        if at_start and len(words) == 1 and not re.search(r"[A-Z0-9]", words[0][1:]) \
                and not _looks_like_subject(words[0], sentence[e:]):
            continue
        while words and words[0].lower() in _NOT_ENTITY:
            s += len(words[0]) + 1
            words = words[1:]
        if not words or words[0].isupper() and len(words) == 1:
            continue  # acronyms handled below
        if overlaps(s, e):
            continue
        add(s, e, " ".join(words), "named")
    for m in _ACRONYM_RE.finditer(sentence):
        if not overlaps(m.start(1), m.end(1)) and m.group(1) not in ("I", "OK", "AM", "PM"):
            add(m.start(1), m.end(1), m.group(1), "term")
    out: dict[str, Entity] = {}
    for _, ent in sorted(found, key=lambda x: x[0]):
        if ent.key in out:
            for a in ent.aliases:
                if a not in out[ent.key].aliases:
                    out[ent.key].aliases.append(a)
        else:
            out[ent.key] = ent
    return list(out.values())


_SUBJECT_VERBS = frozenset("is was has had said says wants wanted will uses used prefers preferred likes owns "
                           "runs ran wrote asked thinks thought and".split())


def _looks_like_subject(word: str, rest: str) -> bool:
    """A sentence-initial capitalised word is a name when a verb follows ("Alice prefers ...")."""
    w = word.lower()
    if w in _NOT_ENTITY or w.endswith(("ing", "ed", "ly")) or len(w) < 3:
        return False
    nxt = rest.split()[:1]
    return bool(nxt) and nxt[0].islower() and (nxt[0] in _SUBJECT_VERBS or nxt[0].endswith("s") and len(nxt[0]) > 3)


def classify(sentence: str, has_time_phrase: bool = False) -> str:
    s = sentence.lower()
    if _DECISION_RE.search(s):
        return "decision"
    if _PREFERENCE_RE.search(s):
        return "preference"
    if _EVENT_RE.search(s) or has_time_phrase:
        return "event"
    if _PLAN_RE.search(s):
        return "plan"
    return "fact"


def normalise_value(value: str) -> str:
    """'300 seconds' -> '300s', '5 minutes' -> '300s', '600s' -> '600s', 'Postgres' -> 'postgres'."""
    v = value.strip().lower().rstrip(".,;:!")
    m = _VALUE_RE.match(v.replace(" ", ""))
    if m and m.group(2) in _DURATION_UNITS:
        secs = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        return f"{secs:g}s"
    return v


def _subject_key(subj: str) -> str:
    toks = [t for t in tokenize(subj) if t not in STOPWORDS and t not in ("it", "this", "that", "there", "we")]
    return " ".join(toks[-3:])


def extract_attribute(sentence: str) -> tuple[str, str]:
    """(subject key, normalised value) for "X is V" / "set X to V" statements, else ("", "")."""
    s = sentence.strip().rstrip(".!")
    for rx in (_SET_RE, _COPULA_RE):
        if rx is _COPULA_RE and not _COPULA_WORD_RE.search(s):
            continue
        for m in rx.finditer(s):
            subj = _subject_key(m.group("subj"))
            val = m.group("val")
            if not subj or val.lower() in STOPWORDS:
                continue
            # A value must look like one: a number, a known tool, or the last words of the clause.
            rest = s[m.end("val"):].strip()
            looks_like_value = (
                bool(re.search(r"\d", val)) or val.lower() in TOOLS
                or not rest or rest[0] in ",;(" or rest.split()[0].lower() in ("because", "since", "for", "so", "and")
            )
            if looks_like_value:
                return subj, normalise_value(val)
    return "", ""


def extract_switch(sentence: str) -> tuple[str, str]:
    """(old, new) for explicit switches; new may be empty ("we no longer use Redis")."""
    for rx in (_SWITCH_RE, _REPLACE_RE, _INSTEAD_RE):
        m = rx.search(sentence)
        if m:
            return _clean_term(m.group("old")), _clean_term(m.group("new"))
    m = _NO_LONGER_RE.search(sentence)
    if m:
        return _clean_term(m.group("old")), ""
    return "", ""


def _clean_term(t: str) -> str:
    words = [w for w in t.strip(" .,;:").split() if w.lower() not in STOPWORDS]
    return " ".join(words).lower()


def is_negated(sentence: str) -> bool:
    toks = set(re.findall(r"[a-z']+", sentence.lower()))
    return bool(toks & _NEGATORS) or "n't" in sentence.lower()


def generate_questions(core: str, fact_type: str, entities: list[Entity], attr_key: str, switch_from: str,
                       speaker: str) -> list[str]:
    """Questions this fact answers (embedded for the question-matching channel)."""
    qs: list[str] = []
    if attr_key:
        qs += [f"What is the {attr_key}?", f"What {attr_key} do we use?"]
    if switch_from:
        qs += [f"What did we switch to from {switch_from}?", f"Why did we move away from {switch_from}?"]
    names = [e.name for e in entities[:2]]
    if fact_type == "decision":
        qs.append(f"What did we decide about {names[0]}?" if names else "What did we decide?")
        qs.append(f"Why did we choose {names[0]}?" if names else "Why was that decided?")
    elif fact_type == "preference":
        qs.append(f"What does the {speaker} prefer{' for ' + names[0] if names else ''}?")
    elif fact_type == "event":
        qs.append(f"What happened with {names[0]}?" if names else "What happened?")
        qs.append(f"When did we work on {names[0]}?" if names else "When did that happen?")
    elif fact_type == "plan":
        qs.append(f"What is the plan for {names[0]}?" if names else "What is the plan?")
    for n in names:
        qs.append(f"What do we know about {n}?")
    seen: list[str] = []
    for q in qs:
        if q not in seen:
            seen.append(q)
    return seen[:5]


def keep_sentence(sentence: str) -> bool:
    """Filter: drop questions, pleasantries, code fences and fragments."""
    s = sentence.strip()
    if len(s) < 15 or s.startswith("```") or s.endswith("?"):
        return False
    words = s.split()
    if len(words) < 4:
        return False
    if _FILLER_RE.match(s) and len(words) < 8:
        return False
    if sum(ch.isalnum() for ch in s) < 0.5 * len(s):
        return False
    return len(content_tokens(s)) >= 2


def analyse_sentence(sentence: str, speaker: str, said_at: datetime, message_ids: list[str]) -> ExtractedFact:
    core = sentence.strip()
    if len(core) > 500:
        core = core[:497].rstrip() + "..."
    occurred = resolve_occurred_at(core, said_at)
    fact_type = classify(core, occurred != said_at)
    entities = detect_entities(core)
    attr_key, attr_value = extract_attribute(core)
    old, new = extract_switch(core)
    return ExtractedFact(
        core=core, fact_type=fact_type, speaker=speaker, occurred_at=occurred, entities=entities,
        attr_key=attr_key, attr_value=attr_value, switch_from=old, switch_to=new, negated=is_negated(core),
        questions=generate_questions(core, fact_type, entities, attr_key, old, speaker),
        message_ids=list(message_ids),
    )


@dataclass
class SourceMessage:
    role: str
    content: str
    said_at: datetime
    message_id: str = ""


def extract_messages(messages: list[SourceMessage]) -> list[ExtractedFact]:
    facts = []
    for msg in messages:
        if msg.role not in ("user", "assistant"):
            continue  # system/tool output is not a statement by either party
        ids = [msg.message_id] if msg.message_id else []
        for sent in split_sentences(msg.content):
            if keep_sentence(sent):
                facts.append(analyse_sentence(sent, msg.role, msg.said_at, ids))
    return facts


def extract_text(text: str, said_at: datetime, message_ids: list[str], speaker: str = "user") -> list[ExtractedFact]:
    return [analyse_sentence(s, speaker, said_at, message_ids) for s in split_sentences(text) if keep_sentence(s)]


async def llm_extract(llm, messages: list[SourceMessage]) -> list[ExtractedFact]:
    """Fact lines from the LLM, each attributed to the message it overlaps most (speaker, id, time)."""
    from services.common.prompts import FACT_EXTRACTION_SYSTEM

    transcript = "\n".join(f"{m.role}: {m.content}" for m in messages)
    res = await llm.chat([{"role": "system", "content": FACT_EXTRACTION_SYSTEM},
                          {"role": "user", "content": transcript}], temperature=0.0)
    facts = []
    msg_tokens = [set(content_tokens(m.content)) for m in messages]
    for line in res.text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if len(line) < 8:
            continue
        lt = set(content_tokens(line))
        best = max(range(len(messages)), key=lambda i: len(lt & msg_tokens[i]), default=None)
        src = messages[best] if best is not None else None
        said_at = src.said_at if src else messages[-1].said_at
        ids = [src.message_id] if src and src.message_id else []
        facts.append(analyse_sentence(line, src.role if src else "user", said_at, ids))
    return facts
