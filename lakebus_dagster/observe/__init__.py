"""Observing the running bus: the reads the monitoring rules decide on (what the sink consumed and
committed, the control topic, the coordinators' group, the live brokers), through plain clients of
Kafka, Connect and the catalog. No Dagster and no decisions: :mod:`lakebus_dagster.monitor` decides
on what these return; the sensors, the assets and ``lakebus status`` call both."""
