"""The Arclight project (written for memrig after seed 000, V1.1): 45 sessions over six weeks building a developer
analytics platform, with deliberate fact evolution (JWT -> iron-session, Resend -> SendGrid, cache TTL 300 s ->
600 s), non-default specifics (port 4000, `arclight:{entity}:{id}` keys, 30-day session cookie, snake_case
tables, UUID primary keys) and the rationale for choices embedded where they were made.

SESSIONS: (session number, day offset from the project start, [(user, assistant), ...]).
PROMPTS: (id, category, question, ground truth, expected strings, source sessions). Categories F 15, R 10,
E 10, S 8, T 7.
"""

SESSIONS = [
    # ---- week 1 ----
    (1, 0, [("Kicking off Arclight, the developer analytics platform. Node + TypeScript, Express API. Run the API on "
             "port 4000 — 3000 is the Next.js dashboard.",
             "Set up: Express + TypeScript API listening on port 4000, dashboard stays on 3000.")]),
    (2, 0, [("Package manager is pnpm; we use a monorepo with apps/api and apps/dashboard.",
             "pnpm workspaces configured with apps/api and apps/dashboard.")]),
    (3, 1, [("For the database: Postgres 16. All table names are snake_case, like github_events and team_members.",
             "Noted: Postgres 16, snake_case table names such as github_events and team_members.")]),
    (4, 1, [("Primary keys are UUIDs everywhere, generated with gen_random_uuid(), never serial integers — we merge "
             "data from several regions later.",
             "UUID primary keys via gen_random_uuid(); no serial ids, so regional merges don't collide.")]),
    (5, 2, [("ORM: let's use Drizzle. It's type-safe and lightweight, and Prisma's generated client felt too heavy "
             "for our cold starts.",
             "Drizzle chosen for type safety and a light footprint; Prisma rejected over its heavy client.")]),
    (6, 2, [("Auth for v1: stateless JWTs signed with HS256, 15-minute access tokens and a refresh token.",
             "JWT auth with HS256, 15-minute access tokens plus refresh tokens.")]),
    (7, 3, [("Validation with Zod on every route; schemas live in src/schemas.",
             "Zod validation per route, schemas in src/schemas.")]),
    (8, 3, [("Logging: pino with JSON output; request ids go in the x-request-id header.",
             "pino JSON logs, request ids carried in x-request-id.")]),
    # ---- week 2 ----
    (9, 7, [("Ingestion pipeline reads GitHub webhooks into github_events; verify the X-Hub-Signature-256 header.",
             "Webhook ingestion into github_events with X-Hub-Signature-256 verification.")]),
    (10, 7, [("Rate limit the public API at 100 requests per minute per API key.",
              "Rate limit set to 100 requests/minute per API key.")]),
    (11, 8, [("Dashboard charts use Recharts; we tried Chart.js but its TypeScript types were poor.",
              "Recharts for charts — Chart.js dropped because of weak TypeScript types.")]),
    (12, 8, [("API errors follow RFC 7807 problem+json responses.",
              "Errors return application/problem+json per RFC 7807.")]),
    (13, 9, [("Transactional email goes through Resend for now — the free tier covers our volume and the API is "
              "simple.", "Resend set up for transactional email (free tier, simple API).")]),
    (14, 9, [("Migrations are generated with drizzle-kit and stored in apps/api/drizzle.",
              "drizzle-kit migrations in apps/api/drizzle.")]),
    (15, 10, [("The metrics rollup runs every 5 minutes and writes to metrics_rollup_5m.",
               "5-minute rollup job writing metrics_rollup_5m.")]),
    (16, 10, [("Dates in the API are ISO 8601 in UTC; the dashboard converts to the user's time zone.",
               "UTC ISO 8601 in the API; client-side time-zone conversion.")]),
    (17, 11, [("Feature flags live in a feature_flags table; no third-party flag service yet.",
               "feature_flags table for flags, no external service.")]),
    (18, 11, [("We considered iron-session already, but stayed on JWT for the first release to ship faster.",
               "iron-session noted as an option; JWT kept for v1 speed.")]),
    # ---- week 3 ----
    (19, 14, [("Add Redis caching with ioredis. Cache TTL is 300 seconds for dashboard queries.",
               "ioredis cache with a 300-second TTL on dashboard queries.")]),
    (20, 14, [("Cache key format: arclight:{entity}:{id}, e.g. arclight:repo:<uuid>.",
               "Keys follow arclight:{entity}:{id}.")]),
    (21, 15, [("Background jobs with BullMQ — Redis is already there for the cache, so no new infrastructure.",
               "BullMQ for jobs, reusing the existing Redis.")]),
    (22, 15, [("Job retries: 3 attempts with exponential backoff starting at 2 seconds.",
               "3 attempts, exponential backoff from 2 s.")]),
    (23, 16, [("Weekly digest emails are a BullMQ job every Monday at 08:00 UTC.",
               "Weekly digest job Mondays 08:00 UTC.")]),
    (24, 16, [("Cache invalidation: on github_events insert we delete arclight:repo:{id} keys.",
               "Invalidate arclight:repo:{id} on new events.")]),
    (25, 17, [("Bug: the digest job sent duplicates because two workers picked the same job; fixed with a jobId "
               "of digest:{team_id}:{week}.", "Duplicate digests fixed by a deterministic jobId.")]),
    (26, 17, [("Dashboard pagination is cursor-based on created_at plus id, page size 50.",
               "Cursor pagination (created_at, id), 50 per page.")]),
    (27, 18, [("Redis memory alarm at 80% in staging; we set maxmemory-policy to allkeys-lru.",
               "allkeys-lru after the staging memory alarm.")]),
    # ---- week 4 ----
    (28, 21, [("Decision: migrate auth from JWT to iron-session. It's simpler at our session scale — we don't need "
               "stateless tokens and revocation with JWT was painful.",
               "Migrating JWT → iron-session: simpler for our scale, easy revocation.")]),
    (29, 21, [("iron-session cookie: name arclight_session, 30-day maxAge, httpOnly, secure, sameSite lax.",
               "arclight_session cookie, 30-day lifetime, httpOnly + secure + lax.")]),
    (30, 22, [("Email: we're moving from Resend to SendGrid. Resend's deliverability to corporate inboxes was poor "
               "and SendGrid gives us dedicated IPs.",
               "Switching Resend → SendGrid for deliverability and dedicated IPs.")]),
    (31, 22, [("The JWT code is fully removed now; refresh tokens are gone with it.",
               "JWT and refresh-token code deleted.")]),
    (32, 23, [("Raise the cache TTL from 300 to 600 seconds — hit rate was only 41% and the data changes slowly.",
               "TTL raised to 600 s after a 41% hit rate.")]),
    (33, 23, [("SendGrid templates are stored as dynamic templates; the digest template id is d-arclight-digest.",
               "SendGrid dynamic template d-arclight-digest for the digest.")]),
    (34, 24, [("Session secret lives in SESSION_PASSWORD, at least 32 characters, rotated quarterly.",
               "SESSION_PASSWORD env var, ≥32 chars, quarterly rotation.")]),
    (35, 24, [("After the TTL change the cache hit rate went up to 78%.",
               "Hit rate now 78% with the 600 s TTL.")]),
    (36, 25, [("Resend account is closed; every email path uses SendGrid now.",
               "Resend closed, all mail through SendGrid.")]),
    # ---- weeks 5-6 ----
    (37, 28, [("Performance: the repo overview query took 1.8 s; adding a composite index on (repo_id, created_at) "
               "brought it to 120 ms.", "Composite index (repo_id, created_at): 1.8 s → 120 ms.")]),
    (38, 29, [("Testing: vitest for unit tests, and Testcontainers for Postgres integration tests.",
               "vitest + Testcontainers for Postgres.")]),
    (39, 30, [("Coverage threshold is 80% lines, enforced in CI.", "80% line coverage gate in CI.")]),
    (40, 31, [("CI runs on GitHub Actions: lint, typecheck, test, then build; Node 20 only.",
               "GitHub Actions pipeline lint → typecheck → test → build on Node 20.")]),
    (41, 32, [("Deploys go to Fly.io from main after CI passes; staging deploys from the develop branch.",
               "Fly.io deploys: main → production, develop → staging.")]),
    (42, 35, [("Observability plan: OpenTelemetry traces exported to Honeycomb; we picked Honeycomb for "
               "high-cardinality queries.", "OTel traces to Honeycomb, chosen for high-cardinality queries.")]),
    (43, 36, [("Add a /healthz endpoint that checks Postgres and Redis; Fly uses it for health checks.",
               "/healthz checks Postgres + Redis for Fly.")]),
    (44, 37, [("Next up: SLO of p95 under 300 ms for dashboard endpoints.",
               "SLO: dashboard p95 < 300 ms.")]),
    (45, 38, [("Retro: biggest wins were the iron-session migration and the cache TTL change; biggest pain was "
               "the Resend deliverability issue.", "Retro noted iron-session + TTL wins, Resend pain.")]),
]

PROMPTS = [
    # F: factual (15)
    ("F01", "F", "What port does the API run on?", "4000", ["4000"], [1]),
    ("F02", "F", "What format are our cache keys?", "arclight:{entity}:{id}", ["arclight:{entity}:{id}"], [20]),
    ("F03", "F", "How long does the session cookie last?", "30 days", ["30-day"], [29]),
    ("F04", "F", "What naming convention do our database tables use?", "snake_case", ["snake_case"], [3]),
    ("F05", "F", "What type are our primary keys?", "UUIDs via gen_random_uuid()", ["UUID"], [4]),
    ("F06", "F", "Which package manager do we use?", "pnpm", ["pnpm"], [2]),
    ("F07", "F", "What is the API rate limit?", "100 requests per minute per API key", ["100 requests"], [10]),
    ("F08", "F", "Which header carries request ids?", "x-request-id", ["x-request-id"], [8]),
    ("F09", "F", "How often does the metrics rollup run?", "Every 5 minutes", ["5 minutes"], [15]),
    ("F10", "F", "What's the session cookie name?", "arclight_session", ["arclight_session"], [29]),
    ("F11", "F", "How many retry attempts do jobs get?", "3 attempts, exponential backoff from 2 s", ["3 attempts"], [22]),
    ("F12", "F", "What page size does dashboard pagination use?", "50", ["50"], [26]),
    ("F13", "F", "Which Redis maxmemory policy did we set?", "allkeys-lru", ["allkeys-lru"], [27]),
    ("F14", "F", "What is the coverage threshold?", "80% lines", ["80%"], [39]),
    ("F15", "F", "What env var holds the session secret?", "SESSION_PASSWORD", ["SESSION_PASSWORD"], [34]),
    # R: rationale (10)
    ("R01", "R", "Why did we choose Drizzle?", "Type-safe and lightweight; Prisma's client was too heavy",
     ["type-safe", "lightweight"], [5]),
    ("R02", "R", "Why did we move to iron-session?", "Simpler at our session scale; JWT revocation was painful",
     ["simpler"], [28]),
    ("R03", "R", "Why BullMQ for background jobs?", "Redis was already present for the cache",
     ["Redis is already"], [21]),
    ("R04", "R", "Why did we switch to SendGrid?", "Resend's deliverability to corporate inboxes was poor; dedicated IPs",
     ["deliverability"], [30]),
    ("R05", "R", "Why did we raise the cache TTL?", "Hit rate was only 41% and the data changes slowly", ["41%"], [32]),
    ("R06", "R", "Why Recharts instead of Chart.js?", "Chart.js had poor TypeScript types", ["TypeScript types"], [11]),
    ("R07", "R", "Why UUID primary keys instead of serial ids?", "Data from several regions will be merged",
     ["regions"], [4]),
    ("R08", "R", "Why did we pick Honeycomb?", "High-cardinality queries", ["high-cardinality"], [42]),
    ("R09", "R", "Why is the API not on port 3000?", "3000 is the Next.js dashboard", ["dashboard"], [1]),
    ("R10", "R", "Why did we start with Resend?", "Free tier covers our volume and the API is simple",
     ["free tier"], [13]),
    # E: evolution (10)
    ("E01", "E", "How has our auth approach changed over the project?", "JWT (HS256) at first, migrated to iron-session "
     "in week 4", ["JWT", "iron-session"], [6, 28]),
    ("E02", "E", "How did our email provider change?", "Resend first, then SendGrid", ["Resend", "SendGrid"], [13, 30]),
    ("E03", "E", "How has the cache TTL changed?", "300 seconds, raised to 600 seconds", ["300", "600"], [19, 32]),
    ("E04", "E", "What happened to refresh tokens?", "Removed along with the JWT code", ["refresh"], [31]),
    ("E05", "E", "How did the cache hit rate change after the TTL change?", "41% to 78%", ["78%"], [32, 35]),
    ("E06", "E", "Did we consider iron-session before migrating?", "Yes, in week 2, but kept JWT for v1",
     ["iron-session"], [18]),
    ("E07", "E", "How did the repo overview query performance change?", "1.8 s to 120 ms after a composite index",
     ["120 ms"], [37]),
    ("E08", "E", "What happened to the Resend account?", "Closed; all email uses SendGrid", ["closed"], [36]),
    ("E09", "E", "How did we fix the duplicate digest emails?", "Deterministic jobId digest:{team_id}:{week}",
     ["jobId"], [25]),
    ("E10", "E", "What changed in Redis after the staging memory alarm?", "maxmemory-policy set to allkeys-lru",
     ["allkeys-lru"], [27]),
    # S: synthesis (8)
    ("S01", "S", "What is Redis used for in Arclight?", "Cache (ioredis) and BullMQ jobs", ["ioredis", "BullMQ"], [19, 21]),
    ("S02", "S", "What does our testing and CI setup look like?", "vitest + Testcontainers, GitHub Actions, 80% coverage",
     ["vitest", "GitHub Actions"], [38, 40]),
    ("S03", "S", "How do the digest emails work end to end?", "BullMQ job Mondays 08:00 UTC, SendGrid template "
     "d-arclight-digest", ["Monday", "d-arclight-digest"], [23, 33]),
    ("S04", "S", "What conventions does our database follow?", "snake_case tables, UUID keys, drizzle-kit migrations",
     ["snake_case", "UUID"], [3, 4, 14]),
    ("S05", "S", "How is the cache kept fresh?", "600 s TTL and deleting arclight:repo:{id} on new events",
     ["600", "arclight:repo"], [24, 32]),
    ("S06", "S", "How do deploys and health checks fit together?", "Fly.io deploys; /healthz checks Postgres and Redis",
     ["Fly", "/healthz"], [41, 43]),
    ("S07", "S", "What were the retro's biggest wins and pains?", "Wins: iron-session, cache TTL; pain: Resend "
     "deliverability", ["iron-session", "Resend"], [45]),
    ("S08", "S", "How do webhook events reach the dashboard?", "Webhooks into github_events, 5-minute rollup, "
     "cached dashboard queries", ["github_events", "rollup"], [9, 15]),
    # T: temporal / current value (7)
    ("T01", "T", "What auth method do we use now?", "iron-session", ["iron-session"], [28, 31]),
    ("T02", "T", "Which email provider do we currently use?", "SendGrid", ["SendGrid"], [30, 36]),
    ("T03", "T", "What is the current cache TTL?", "600 seconds", ["600"], [32]),
    ("T04", "T", "Do we still have refresh tokens?", "No, removed with JWT", ["refresh"], [31]),
    ("T05", "T", "What is the current cache hit rate?", "78%", ["78%"], [35]),
    ("T06", "T", "Are we still on Resend for any emails?", "No — the account is closed, everything uses SendGrid",
     ["SendGrid"], [36]),
    ("T07", "T", "How are sessions stored now?", "iron-session cookie arclight_session", ["arclight_session"], [29]),
]
