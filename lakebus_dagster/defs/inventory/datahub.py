"""``publish_to_datahub``: the bus inventory and the lake's lineage in the team's DataHub, as seed 004's
DataHub source reported them (:mod:`lakebus_dagster.inventory.datahub` builds the metadata).

Off unless configured: ``LAKEBUS_DATAHUB_URL`` names DataHub's GMS endpoint (its token,
``LAKEBUS_DATAHUB_TOKEN``, is a secret: read as a Dagster ``EnvVar``). ``to_file`` writes the same
metadata to a JSON file in DataHub's own file-sink format instead, for a review or for DataHub's
``datahub ingest`` of a file.
"""


from pathlib import Path

import dagster as dg
from pydantic import Field

from lakebus_dagster.defs.inventory.assets import read_inventory
from lakebus_dagster.defs.inventory.resources import TopicInventoryResource
from lakebus_dagster.defs.resources import BusLayoutResource, KafkaResource
from lakebus_dagster.setting_readers import SettingsReader

URL_VAR, TOKEN_VAR = "LAKEBUS_DATAHUB_URL", "LAKEBUS_DATAHUB_TOKEN"
PUBLISH_JOB = "publish_to_datahub"


class DataHubResource(dg.ConfigurableResource):
    """Where the catalog metadata goes: DataHub's GMS (unset: nowhere unless a run names a file)."""

    gms_url: str | None = Field(default=None, description=f"DataHub's GMS endpoint ({URL_VAR}); unset: off")
    token: str | None = Field(default=None, description=f"its access token; use dg.EnvVar({TOKEN_VAR!r}), never a literal")

    def emit(self, proposals: list) -> None:
        from datahub.emitter.rest_emitter import DatahubRestEmitter

        emitter = DatahubRestEmitter(self.gms_url, token=self.token or None, connect_timeout_sec=10, read_timeout_sec=30)
        try:
            emitter.test_connection()
            for proposal in proposals:
                emitter.emit_mcp(proposal)
        finally:
            emitter.close()


def datahub_resource(reader: SettingsReader | None = None) -> DataHubResource:
    """The deployment's DataHub: the URL from the environment or the config file, the token as an EnvVar."""
    e = reader or SettingsReader()
    url = e.optional_url(URL_VAR)
    return DataHubResource(gms_url=url, token=dg.EnvVar(TOKEN_VAR) if url and e.raw(TOKEN_VAR) else None)


class PublishConfig(dg.Config):
    to_file: str | None = Field(default=None, description="write the metadata to this JSON file (DataHub's file-sink "
                                "format) instead of sending it to LAKEBUS_DATAHUB_URL")


@dg.op(description="Every topic with its schema per event type, and the lineage topic → ODS → DWS, to DataHub.")
def publish_catalog_op(context: dg.OpExecutionContext, config: PublishConfig, kafka: KafkaResource,
                       topic_inventory: TopicInventoryResource, layout: BusLayoutResource, datahub: DataHubResource) -> None:
    try:
        from datahub.ingestion.sink.file import write_metadata_file
    except ImportError:
        raise dg.Failure("publish_to_datahub needs DataHub's library: install lakebus_dagster[datahub] "
                         "(the image: build it with --build-arg EXTRAS=[datahub])", allow_retries=False) from None

    from lakebus_dagster.inventory.datahub import lineage_proposals, topic_proposals
    from lakebus_dagster.lake.dws import DWS_TABLES, LakehouseTables

    if not config.to_file and not datahub.gms_url:
        raise dg.Failure(f"DataHub is off: set {URL_VAR} (and {TOKEN_VAR} if it needs one), or run with to_file",
                         allow_retries=False)
    bus = layout.layout()
    inventory = read_inventory(kafka, topic_inventory)
    tables = LakehouseTables.from_routes(bus.routes, DWS_TABLES)
    dws = {tables.dws(spec): [tables.ods_table(event) for event in spec.sources] for spec in DWS_TABLES}
    proposals = topic_proposals(inventory) + lineage_proposals(bus.bus_topic.name, bus.tables, dws)
    where = config.to_file or datahub.gms_url
    if config.to_file:
        write_metadata_file(Path(config.to_file), proposals)
    else:
        datahub.emit(proposals)
    context.log.info(f"{len(proposals)} metadata proposal(s) on {len(inventory)} topic(s), {len(bus.tables)} ODS and "
                     f"{len(dws)} DWS table(s) published to {where}")
    context.add_output_metadata({"proposals": len(proposals), "topics": len(inventory), "published_to": where})


@dg.job(name=PUBLISH_JOB, tags={"domain": "inventory"},
        description="Publish the bus inventory (each topic, its schema per event type) and the lineage topic → ODS table → "
        "DWS table to DataHub (LAKEBUS_DATAHUB_URL; off unless set), or to a file in DataHub's format.")
def publish_to_datahub() -> None:
    publish_catalog_op()
