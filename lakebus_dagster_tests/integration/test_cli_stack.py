"""The ``lakebus connectors`` / ``lakebus status`` cases that need the running stack's Kafka and
services (a real topic's end offsets, the services' health), run in the integration stage where the
stack is up. They live beside the other CLI tests (unit/test_cli.py: the helpers and fake servers);
here they are collected under the ``integration`` marker instead of being skipped in the unit stage."""

from __future__ import annotations

import pytest

from lakebus_dagster_tests.unit.test_cli import (  # noqa: F401 - fixtures are found by name
    connectors_declared_connector_matching_says_so_on_the_stack,
    connectors_describes_tasks_drift_and_lag_on_the_stack,
    fake_connect,
    status_exit_code_follows_the_connector_on_the_running_stack,
    topic_with_five_records,
)

pytestmark = pytest.mark.integration

test_connectors_describes_tasks_drift_and_lag = connectors_describes_tasks_drift_and_lag_on_the_stack
test_connectors_declared_connector_matching_says_so = connectors_declared_connector_matching_says_so_on_the_stack
test_status_exit_code_follows_the_connector_on_the_running_stack = status_exit_code_follows_the_connector_on_the_running_stack
