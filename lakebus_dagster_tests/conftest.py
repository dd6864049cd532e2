"""Shared fixtures. Integration tests run against the real local stack (no fakes): the ``stack``
fixture brings it up if it is not (a no-op when ``make test`` already did) and never stops it —
``make test`` stops what it started."""

from __future__ import annotations

import uuid

import pytest

from lakebus_dagster.settings import Settings, load_local_secrets, load_settings


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings()


@pytest.fixture(scope="session")
def stack(settings: Settings) -> Settings:
    from lakebus_dagster.stack import manager

    manager.up(settings)
    load_local_secrets(settings)
    return settings


@pytest.fixture(scope="session")
def spark(stack: Settings):
    """One local SparkSession for the whole run (JVM start-up is the expensive part)."""
    from pyspark.sql import SparkSession

    from lakebus_dagster.lake.catalog import LakeEndpoints
    from lakebus_dagster.lake.spark import prepare_driver_env, spark_conf, spark_jars
    from lakebus_dagster.stack.jars import jars_dir

    prepare_driver_env()
    conf = spark_conf(LakeEndpoints.local(stack), master=stack.spark_master, driver_memory=stack.spark_driver_memory,
                      jars=spark_jars(jars_dir(stack)))
    builder = SparkSession.builder.appName("lakebus-tests")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    yield session
    session.stop()


@pytest.fixture
def run_id() -> str:
    """A short lower-case suffix that keeps each test's topics, connector and namespace apart."""
    return uuid.uuid4().hex[:8]
