"""Change capture from PostgreSQL into the lake (issue 30): the demo database and its change
generator (:mod:`.demo`), the declared capture — Debezium source, CDC topics, Iceberg change-table
sink — (:mod:`.capture`), what lakebus checks and manages in the database (:mod:`.database`) and the
typed change tables (:mod:`.tables`)."""
