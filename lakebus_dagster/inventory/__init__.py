"""The bus as a catalog (seed 004): topic inventory, inferred/declared schemas, the Connect cluster view.

Pure logic and bounded reads; the Dagster assets and the sensor live in ``defs/inventory``.
"""
