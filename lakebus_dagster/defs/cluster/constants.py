"""Names shared by the cluster-wide jobs."""

DOMAIN_TAG = {"domain": "connect-cluster"}
DEFAULT_WAIT_S = 60.0
#: jobs whose declarations resume_all_connectors may lift (an operator's own pause/stop is kept)
BULK_PARK_JOBS = ("pause_all_connectors", "stop_all_connectors")
