"""Every metric the rig reports, in one registry (see registry.py)."""
