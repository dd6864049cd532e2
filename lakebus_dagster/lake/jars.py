"""Where the Spark jars (Iceberg runtime + AWS bundle) are, without depending on the dev stack.

The jars are resolved by Maven from ``infra/maven`` into a cache keyed by a hash of its sources (see
:mod:`lakebus_dagster.stack.jars`, which fetches them). This module only *locates* that directory,
so the Dagster resources can point Spark at it while production code stays independent of
``stack/``; a deployment that ships the jars elsewhere sets ``LakeSparkResource.jars_dir``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lakebus_dagster.settings import REPO_ROOT, Settings

MAVEN_DIR = REPO_ROOT / "infra" / "maven"


def maven_sources_digest() -> str:
    """A short hash of every source file under ``infra/maven`` (path and content).

    Poms, and the Java sources of lakebus's own Connect plugin (``connect-plugin-lakebus``, compiled
    by the same Maven run); Maven's build output (``target/``) is not a source.
    """
    digest = hashlib.sha256()
    sources = (p for p in MAVEN_DIR.rglob("*") if p.is_file() and "target" not in p.relative_to(MAVEN_DIR).parts)
    for source in sorted(sources):
        digest.update(source.relative_to(MAVEN_DIR).as_posix().encode())
        digest.update(b"\0")
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def jars_dir(settings: Settings) -> Path:
    """Where the jars for the current Maven sources live (whether or not they were fetched yet)."""
    return settings.spark.jars_cache_dir / maven_sources_digest()
