"""The Iceberg table properties of every lake table, declared once: the sink's auto-create props
(ODS), the DWS tables' ``TBLPROPERTIES`` and what provisioning reconciles on existing tables all
read these dicts.

Why the metadata bounds (measured on the local stack): the sink commits every 10 s, so an ODS
table gains ~347 snapshots an hour, and every commit writes a new ``metadata.json`` and keeps the
old one (128 files after 40 minutes, the newest 150 KB). Without a job:

- ``write.metadata.delete-after-commit.enabled=true`` and ``write.metadata.previous-versions-max=50``:
  after each commit the *catalog server* deletes the oldest tracked ``metadata.json`` beyond the 50
  previous versions (``BaseMetastoreTableOperations`` → ``CatalogUtil.deleteRemovedMetadataFiles``;
  the sink's REST client does not, the JDBC-backed REST catalog does). 50 versions is ~8 minutes of
  10 s commits to roll back to or debug with. Iceberg's defaults: delete off, 100 versions.
- ``history.expire.max-snapshot-age-ms=1080000`` (18 min) and ``history.expire.min-snapshots-to-keep=100``:
  the defaults an ``expire_snapshots`` run uses when called without ``older_than``/``retain_last``,
  equal to what lakebus's maintenance passes (twice an hour). At most 48 min of 10 s commits stays,
  ≈285 snapshots (+ 31 tagged) ≈ 0.4 MiB of ``metadata.json`` (≈1.1 KB a sink snapshot), rewritten on every commit
  and read by every ``loadTable``; 6 h made it ≈2.3 MiB, Iceberg's default of 5 days ≈45 MiB. The
  tops of hours and days stay as tags (:mod:`lakebus_dagster.lake.time_travel`). Nothing expires on
  commit: these only take effect when an expire run happens.
- ``commit.retry.num-retries=10`` (default 4): compaction, MERGE and the sink's 10 s commits run side
  by side on the same tables; each conflict costs a retry.

Source: Iceberg 1.11 configuration.md ("Table behavior properties") and maintenance.md ("Remove old
metadata files"); the properties apply at a table's creation (``iceberg.tables.auto-create-props.*``,
``TBLPROPERTIES``) and to existing tables through ``provision.storage.reconcile_table_properties``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: after each commit the catalog deletes the oldest tracked metadata.json beyond PREVIOUS_VERSIONS_MAX
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
#: defaults of an expire_snapshots run called without older_than / retain_last
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
COMMIT_NUM_RETRIES = "commit.retry.num-retries"

#: 18 min of snapshots (maintenance's expiry window): ≈108 at 10 s commits
EXPIRY_WINDOW_MS = 18 * 60 * 1000

#: what bounds metadata growth without a maintenance job; settable on existing tables (provisioning)
METADATA_BOUNDS: Mapping[str, str] = MappingProxyType({
    DELETE_AFTER_COMMIT: "true",
    PREVIOUS_VERSIONS_MAX: "50",
    MAX_SNAPSHOT_AGE_MS: str(EXPIRY_WINDOW_MS),
    MIN_SNAPSHOTS_TO_KEEP: "100",
    COMMIT_NUM_RETRIES: "10",
})

#: format and codec every lake table is created with (format-version is not a property afterwards:
#: it is part of the table metadata, so provisioning never reconciles it)
FORMAT_DEFAULTS: Mapping[str, str] = MappingProxyType({
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
})

#: the properties a new lake table (ODS by the sink, DWS by Spark) is created with
CREATE_PROPERTIES: Mapping[str, str] = MappingProxyType({**FORMAT_DEFAULTS, **METADATA_BOUNDS})

#: the sink's config prefix for properties set on the tables it auto-creates
SINK_AUTO_CREATE_PREFIX = "iceberg.tables.auto-create-props."


def sink_auto_create_props() -> dict[str, str]:
    """``iceberg.tables.auto-create-props.<key>`` for every property of :data:`CREATE_PROPERTIES`."""
    return {f"{SINK_AUTO_CREATE_PREFIX}{key}": value for key, value in CREATE_PROPERTIES.items()}
