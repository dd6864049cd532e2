"""diff_configs / ConfigDiff: what counts as a change (and so triggers a PUT) and what is shown."""

from __future__ import annotations

from lakebus_dagster.connect import ConfigDiff, diff_configs
from lakebus_dagster.connect.redaction import MASK, is_placeholder, is_secret_key, scrub

LIVE = {
    "name": "iceberg-sink",
    "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
    "tasks.max": "1",
    "topics": "events",
    "iceberg.tables.dynamic-enabled": "true",
}


def test_equal_configs_give_an_empty_diff() -> None:
    diff = diff_configs({k: v for k, v in LIVE.items() if k != "name"}, LIVE)

    assert diff.is_empty
    assert diff == ConfigDiff()
    assert diff.as_markdown() == "No changes."


def test_name_is_ignored_on_both_sides() -> None:
    assert diff_configs({**LIVE, "name": "other"}, {k: v for k, v in LIVE.items() if k != "name"}).is_empty


def test_values_are_normalised_before_comparing() -> None:
    desired = {**LIVE, "tasks.max": 1, "iceberg.tables.dynamic-enabled": True, "topics": " events\n"}
    assert diff_configs(desired, LIVE).is_empty
    assert diff_configs({**LIVE, "iceberg.tables.dynamic-enabled": "TRUE"}, LIVE).is_empty
    assert diff_configs(LIVE, {**LIVE, "iceberg.tables.dynamic-enabled": "True"}).is_empty


def test_changed_added_and_removed_keys() -> None:
    desired = {**LIVE, "tasks.max": "2", "errors.tolerance": "all"}
    del desired["iceberg.tables.dynamic-enabled"]

    diff = diff_configs(desired, LIVE)

    assert not diff.is_empty
    assert diff.changed == {"tasks.max": ("1", "2")}
    assert diff.added == {"errors.tolerance": "all"}
    assert diff.removed == {"iceberg.tables.dynamic-enabled": "true"}


def test_placeholders_compare_as_written() -> None:
    live = {"s3.secret-access-key": "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}"}

    assert diff_configs(dict(live), live).is_empty
    assert diff_configs({"s3.secret-access-key": "${env:OTHER}"}, live).changed == {
        "s3.secret-access-key": ("${env:LAKEBUS_S3_SECRET_ACCESS_KEY}", "${env:OTHER}")
    }


def test_redacted_masks_plain_secrets_and_keeps_placeholders() -> None:
    desired = {
        "iceberg.catalog.s3.secret-access-key": "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}",
        "iceberg.catalog.s3.access-key-id": "${file:/etc/lakebus/s3.properties:access_key}",
        "connection.Password": "hunter2",
        "api.TOKEN": "abc",
        "sasl.credentials": "user:pw",
        "topics": "events",
    }
    live = {"iceberg.catalog.client.secret": "old-secret", "topics": "orders"}

    safe = diff_configs(desired, live).redacted()

    assert safe.added == {
        "iceberg.catalog.s3.secret-access-key": "${env:LAKEBUS_S3_SECRET_ACCESS_KEY}",
        "iceberg.catalog.s3.access-key-id": "${file:/etc/lakebus/s3.properties:access_key}",
        "connection.Password": MASK,
        "api.TOKEN": MASK,
        "sasl.credentials": MASK,
    }
    assert safe.removed == {"iceberg.catalog.client.secret": MASK}
    assert safe.changed == {"topics": ("orders", "events")}


def test_secret_with_text_around_a_placeholder_is_masked() -> None:
    assert is_placeholder("${env:A}${env:B}")
    assert not is_placeholder("prefix-${env:A}")
    assert diff_configs({"db.password": "x${env:A}"}, {}).redacted().added == {"db.password": MASK}


def test_secret_key_detection_is_case_insensitive_on_the_key_name() -> None:
    assert all(is_secret_key(k) for k in ("PASSWORD", "client.Secret", "s3.access-key-id", "Token", "gcp.credential"))
    assert not is_secret_key("topics")


def test_scrub_masks_secret_values_only() -> None:
    config = {"s3.secret-key": "hunter2", "topics": "events", "token": "${env:T}"}
    message = "Invalid value hunter2 for s3.secret-key; topics=events; token=${env:T}"

    assert scrub(message, config) == f"Invalid value {MASK} for s3.secret-key; topics=events; token=${{env:T}}"


def test_markdown_table_is_sorted_redacted_and_escaped() -> None:
    desired = {"topics": "a|b", "db.password": "hunter2", "errors.tolerance": "all"}
    live = {"topics": "a", "transforms": "route"}

    markdown = diff_configs(desired, live).as_markdown()

    assert markdown.splitlines() == [
        "| Key | Change | Live | Desired |",
        "| --- | --- | --- | --- |",
        f"| db.password | added | — | {MASK} |",
        "| errors.tolerance | added | — | all |",
        "| topics | changed | a | a\\|b |",
        "| transforms | removed | route | — |",
    ]
    assert "hunter2" not in markdown
