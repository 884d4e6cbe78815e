"""`octybot-real`: Octybot (tbelfort/octybot 9d0d070) itself, its own Claude Code hooks run by Bun (see backend.py)."""
