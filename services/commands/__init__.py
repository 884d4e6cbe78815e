"""The `memrig` subcommands that were inline in services/cli.py, each module imported only when its command is
parsed (services/common/subcommand.py):

    rig.py             up, down, serve      the rig's services and backends, in the background or one in the foreground
    catalog.py         list                 suites, backends and services
    bench.py           bench, bench-all, bench-local
    namespace.py       ingest, retrieve, reset   one backend's namespace, with the CLI's journal (services/cli_state.py)
    runs.py            report, compare      a finished run directory, or two
    conformance.py     conformance
    judge_agreement.py judge-agreement
    common.py          what several of them share: the state directory, the LLM-role flags
"""
