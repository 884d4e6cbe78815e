"""llm-mock: an offline, deterministic, OpenAI-compatible chat server for the rig.

    python -m services.llm_mock --port P [--host 127.0.0.1] [--latency-ms F] [--latency-jitter-ms F]
        [--seed N] [--prompt-tokens-override N] [--completion-tokens-override N] [--error-rate F]

It reads the task from the first line of the system prompt (services/common/prompts.py markers) and answers
extractively (answerer), summarises keeping the gist (compaction), writes flush notes (flush), grades
(judge 0-3, binary_judge, pairwise, continuity 1-5) and extracts facts (extraction). Each behaviour is a
small pure module over text.py; tasks.py routes, validation.py checks requests, app.py serves.
Offline-judge numbers from this mock are rubric heuristics, not a model: reports must say so.
"""

# Bump when a behaviour changes the text it produces: reports record it (via /health and
# system_fingerprint) so offline-judge numbers are tied to the mock that made them.
BEHAVIOUR_VERSION = "1"
