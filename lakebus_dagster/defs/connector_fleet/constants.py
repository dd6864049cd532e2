"""Names shared by the jobs over every connector (the tag value predates the package's name and is kept: runs are filtered by it)."""

DOMAIN_TAG = {"domain": "connect-cluster"}
DEFAULT_WAIT_S = 60.0
