"""Failure drills: named scenarios (seed 000 V2.3 "Failure Modes" plus error bursts and 429 storms) run through the
fault proxy's admin API on a seeded timeline, each checked against its expected outcome and reported as pass or
fail with the measured figure. `catalog.DRILLS` lists them; `runner.run_drills` runs them.
"""
