"""Names shared by the cluster-wide jobs."""

DOMAIN_TAG = {"domain": "connect-cluster"}
DEFAULT_WAIT_S = 60.0
