"""Checked argument types for ``argparse``: argparse reports ``argument --count: <message>``.

Why not in :mod:`lakebus_dagster.cli`: the modules the CLI drives (the stack, the event generator,
the demo) define their own options for their ``python -m`` entry points, and a module below the
CLI must not import it (issue 22: no package cycles). These functions import nothing of lakebus.
"""

from __future__ import annotations

import argparse
import json
from datetime import date
from typing import Any


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def percent(text: str) -> float:
    value = positive_float(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"must be a percentage in (0, 100], got {text!r}")
    return value


def iso_date(text: str) -> str:
    """A real calendar date written ``YYYY-MM-DD`` (``2025-13-45`` and ``2025-1-5`` are refused)."""
    try:
        if len(text) != 10:
            raise ValueError
        date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a real date written YYYY-MM-DD, got {text!r}") from None
    return text


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"is not valid JSON ({exc.msg} at character {exc.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object {{...}}, got {type(value).__name__}: {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"must be KEY=VALUE, got {text!r}")
    return key.strip(), value
