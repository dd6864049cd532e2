"""What a deployment runs with, declared once: the Dagster instance's limits and timeouts
(:mod:`.instance`), the values of deploy/ (:mod:`.values`, from ``deploy/values.yaml`` and the
settings the code reads) and the files rendered from them (:mod:`.render`, ``lakebus deploy render``)."""
