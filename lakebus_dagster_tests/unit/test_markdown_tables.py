"""The run-metadata tables of provisioning and the connector jobs, written by the one markdown helper:
the lines a person reads in the UI (and the integration tests parse) with every cell escaped."""

from __future__ import annotations

import re

from lakebus_dagster.connect.models import ConnectorStatus, TaskStatus
from lakebus_dagster.defs.connectors.status import status_markdown
from lakebus_dagster.provision import Action, Outcome, outcomes_markdown

#: the row pattern ``integration/test_dagster_ui.py`` reads the outcomes table with (kept in step by hand)
OUTCOME_ROW = re.compile(r"^\| (\w+) \| `([^`]+)` \| \*\*(\w+)\*\* \|", re.M)


def test_outcomes_table_lines_and_the_pattern_the_ui_test_reads():
    md = outcomes_markdown([
        Outcome("topic", "events-1a2b", Action.CREATED, "1 partition(s), RF 1, cleanup.policy=delete"),
        Outcome("connector", "events-iceberg-sink", Action.UPDATED, "a|b\nc"),
        Outcome("namespace", "demo", Action.UNCHANGED),
    ])
    assert md.splitlines() == [
        "| kind | name | outcome | details |",
        "|---|---|---|---|",
        "| topic | `events-1a2b` | **created** | 1 partition(s), RF 1, cleanup.policy=delete |",
        "| connector | `events-iceberg-sink` | **updated** | a\\|b c |",
        "| namespace | `demo` | **unchanged** |  |",
    ]
    assert OUTCOME_ROW.findall(md) == [
        ("topic", "events-1a2b", "created"), ("connector", "events-iceberg-sink", "updated"), ("namespace", "demo", "unchanged"),
    ]


def test_connector_status_table_has_the_connector_then_each_task():
    status = ConnectorStatus("sink", "RUNNING", "w1:8083", tasks=[
        TaskStatus(0, "RUNNING", "w1:8083"),
        TaskStatus(1, "FAILED", "w2:8083", trace="org.apache.kafka.connect.errors.DataException: a|b\n\tat X.y(X.java:1)"),
    ])
    assert status_markdown(status).splitlines() == [
        "| part | state | worker | trace (first line) |",
        "|---|---|---|---|",
        "| connector | RUNNING | w1:8083 |  |",
        "| task 0 | RUNNING | w1:8083 |  |",
        "| task 1 | FAILED | w2:8083 | org.apache.kafka.connect.errors.DataException: a\\|b |",
    ]
