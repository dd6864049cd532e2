-- First start of the compose Postgres: the catalog's database next to Dagster's (POSTGRES_DB).
CREATE DATABASE iceberg_catalog;
