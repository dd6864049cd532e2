"""Benchmarks (not tests): ``python -m benchmarks`` (``make bench``) runs every ``bench_*`` module.

Each module has a ``run(...) -> dict`` returning its measurements; ``__main__`` prints them next to
their targets and appends the run, with the machine it ran on, to ``build/benchmarks.json``.
Results are recorded in ``BENCHMARKS.md`` by hand.
"""
