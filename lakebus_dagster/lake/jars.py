"""Where the Spark jars (Iceberg runtime + AWS bundle) are, without depending on the dev stack.

The jars are resolved by Maven from ``infra/maven`` into a cache keyed by a hash of the Maven
sources (see :mod:`lakebus_dagster.stack.jars`, which fetches them). This module only *locates* that
directory, so the Dagster resources can point Spark at it while production code stays independent
of ``stack/``; a deployment that ships the jars elsewhere sets ``LakeSparkResource.jars_dir``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lakebus_dagster.settings import REPO_ROOT, Settings

MAVEN_DIR = REPO_ROOT / "infra" / "maven"


def poms_digest() -> str:
    """A short hash of every pom under ``infra/maven`` (path and content)."""
    digest = hashlib.sha256()
    for pom in sorted(MAVEN_DIR.rglob("pom.xml")):
        digest.update(pom.relative_to(MAVEN_DIR).as_posix().encode())
        digest.update(pom.read_bytes())
    return digest.hexdigest()[:12]


def jars_dir(settings: Settings) -> Path:
    """Where the jars for the current poms live (whether or not they were fetched yet)."""
    return settings.jars_cache_dir / poms_digest()
