"""`openclaw-real`: OpenClaw 2026.9.6 itself, driven through its public SDK by a Node sidecar."""
