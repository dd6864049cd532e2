"""Who may do what in production, declared once and rendered into deploy/ (issue 31.3).

* Kafka: one Strimzi ``KafkaUser`` per principal of the local ``secured`` profile, with exactly the
  ACLs it grants there (:data:`lakebus_dagster.kafka.acls.ACLS`, which ``stack/security.py`` creates
  on its broker: the profile's proof is the proof of these), spelled as Strimzi spells them; no
  lakebus principal is a super user (the local broker's own inter-broker login is; Strimzi's brokers
  have their own certificates). The observer's password is the code location's, the operations
  principal's is in its own Secret that only the bus-changing jobs' run pods mount.
* The object store: one user per service with the least policy it needs — the Connect workers (the
  sink writes data files), the catalog (writes table metadata) and Spark Connect (DWS MERGEs,
  maintenance) write the warehouse; the code location and its runs only read it (tables change
  through the catalog, Spark Connect and the sink); the run logs' user reads and writes its own
  bucket only. Only the one-shot init (compose's ``minio-init``, the Job ``lakebus-minio-init``)
  holds the root key pair: it creates the buckets, the policies and these users.

Each user's key pair is a compose variable (required) and a Kubernetes Secret + keys;
deploy/README.md's Secrets table lists them (``unit/test_deploy_secrets.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lakebus_dagster.kafka.acls import ACLS, OBSERVER, OPERATIONS, OPERATIONS_SECRET, PRINCIPALS
from lakebus_dagster.secret_env import S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR

__all__ = ["CONNECT_POD_LABELS", "DAGSTER_POD_LABEL", "KAFKA_CA_SECRET", "OBJECT_STORE_USERS", "ObjectStoreUser", "kafka_ca_mount",
           "kafka_users", "minio_init_script", "object_store_policies", "strimzi_acls"]

#: where the passwords of lakebus's own principals come from (Secret, key); the others' the User Operator
#: generates into a Secret named like the user (key ``password``)
KAFKA_PASSWORD_SECRETS = {OBSERVER: ("lakebus-secrets", PRINCIPALS[OBSERVER].password_var),
                          OPERATIONS: (OPERATIONS_SECRET, PRINCIPALS[OPERATIONS].password_var)}
_RESOURCE_TYPES = {"TOPIC": "topic", "GROUP": "group", "TRANSACTIONAL_ID": "transactionalId", "CLUSTER": "cluster"}
_PATTERN_TYPES = {"LITERAL": "literal", "PREFIXED": "prefix"}


def strimzi_operation(operation: str) -> str:
    """Kafka's ``DESCRIBE_CONFIGS`` as Strimzi's ``DescribeConfigs``."""
    return "".join(part.title() for part in operation.split("_"))


def strimzi_acls(rules: list[tuple[str, str, str, tuple[str, ...]]]) -> list[dict[str, Any]]:
    """One principal's ``(resource type, pattern type, name, operations)`` rules as ``KafkaUser.spec.authorization.acls``."""
    out = []
    for rtype, ptype, name, operations in rules:
        resource: dict[str, Any] = {"type": _RESOURCE_TYPES[rtype]}
        if rtype != "CLUSTER":
            resource.update(name=name, patternType=_PATTERN_TYPES[ptype])
        out.append({"resource": resource, "operations": [strimzi_operation(op) for op in operations], "host": "*"})
    return out


def kafka_users() -> list[dict[str, Any]]:
    """name, ACLs and where its password comes from, per principal :data:`lakebus_dagster.kafka.acls.ACLS`
    grants rules (the secured profile's; its broker-only super user has no KafkaUser)."""
    return [{"name": name, "acls": strimzi_acls(rules), "password_secret": KAFKA_PASSWORD_SECRETS.get(name)}
            for name, rules in ACLS.items()]


@dataclass(frozen=True)
class ObjectStoreUser:
    """A service's object-store user: its policy, and where its key pair is (compose variables, Kubernetes Secret + keys)."""

    service: str
    policy: str
    compose_vars: tuple[str, str]
    secret: str
    secret_keys: tuple[str, str] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")

    @property
    def init_vars(self) -> tuple[str, str]:
        """The init's environment variables holding this user's key pair."""
        stem = self.service.upper().replace("-", "_")
        return f"{stem}_ACCESS_KEY_ID", f"{stem}_SECRET_ACCESS_KEY"


OBJECT_STORE_USERS = (
    ObjectStoreUser("connect", "lakebus-warehouse-write", ("CONNECT_S3_ACCESS_KEY_ID", "CONNECT_S3_SECRET_ACCESS_KEY"), "lakebus-s3-connect"),
    ObjectStoreUser("catalog", "lakebus-warehouse-write", ("CATALOG_S3_ACCESS_KEY_ID", "CATALOG_S3_SECRET_ACCESS_KEY"), "lakebus-s3-catalog"),
    ObjectStoreUser("spark-connect", "lakebus-warehouse-write", ("SPARK_S3_ACCESS_KEY_ID", "SPARK_S3_SECRET_ACCESS_KEY"), "lakebus-s3-spark"),
    ObjectStoreUser("dagster", "lakebus-warehouse-read", (S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR), "lakebus-secrets",
                    (S3_ACCESS_KEY_VAR, S3_SECRET_KEY_VAR)),
    ObjectStoreUser("compute-logs", "lakebus-compute-logs",
                    ("DAGSTER_COMPUTE_LOGS_ACCESS_KEY_ID", "DAGSTER_COMPUTE_LOGS_SECRET_ACCESS_KEY"), "dagster-compute-logs"),
)
#: the Connect workers' REST extension (lakebus's plugin, infra/maven/connect-plugin-lakebus): Kafka's basic
#: auth (the secured profile's JAAS login) except for the unauthenticated probes GET / and GET /health
REST_EXTENSION = "io.lakebus.connect.rest.BasicAuthRestExtension"
#: the label of every Dagster pod (the chart's webserver, daemon, user deployment and run pods), which the
#: NetworkPolicies let reach the catalog, Spark Connect and Connect's REST API
DAGSTER_POD_LABEL = {"lakebus.io/access": "dagster"}
#: Strimzi's labels of the KafkaConnect ``lakebus``'s pods
CONNECT_POD_LABELS = {"strimzi.io/cluster": "lakebus", "strimzi.io/kind": "KafkaConnect"}

#: the Strimzi ``Kafka`` (k8s/strimzi/kafka.yaml) and the Secret its operator publishes the cluster CA's
#: certificate in (``<cluster>-cluster-ca-cert``, key ``ca.crt``): the CA that signs the brokers' TLS
#: certificates, no public one, so every client trusts it explicitly — the ``KafkaConnect`` through
#: ``tls.trustedCertificates``, the Dagster code location and run pods as a file mounted at
#: ``LAKEBUS_KAFKA_SSL_CA_LOCATION`` (:func:`kafka_ca_mount`)
KAFKA_CLUSTER = "lakebus"
KAFKA_CA_SECRET = f"{KAFKA_CLUSTER}-cluster-ca-cert"
KAFKA_CA_KEY = "ca.crt"
KAFKA_CA_VOLUME = "kafka-cluster-ca"


def kafka_ca_mount(ca_location: str) -> dict[str, list[dict[str, Any]]]:
    """The volume and mount (the Helm chart's ``volumes`` / ``volumeMounts``) that put the cluster CA's
    certificate (:data:`KAFKA_CA_SECRET`, key :data:`KAFKA_CA_KEY`) at ``ca_location``, an absolute file path;
    its directory becomes the mount (what the image has there is hidden)."""
    directory, _, name = ca_location.rpartition("/")
    if not ca_location.startswith("/") or not directory or not name:
        raise ValueError(f"{ca_location!r} is not an absolute file path")
    return {
        "volumes": [{"name": KAFKA_CA_VOLUME,
                     "secret": {"secretName": KAFKA_CA_SECRET, "items": [{"key": KAFKA_CA_KEY, "path": name}]}}],
        "volumeMounts": [{"name": KAFKA_CA_VOLUME, "mountPath": directory, "readOnly": True}],
    }

#: the root key pair: MinIO itself and the init, nobody else
ROOT_VARS = ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD")
ROOT_SECRET = "minio-root"


def _statement(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def object_store_policies(bucket: str, logs_bucket: str) -> dict[str, dict[str, Any]]:
    """policy name -> its IAM policy document (MinIO and S3 read the same JSON)."""
    def bucket_rw(name: str) -> list[dict[str, Any]]:
        return [_statement(["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"], [f"arn:aws:s3:::{name}"]),
                _statement(["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                            "s3:ListMultipartUploadParts"], [f"arn:aws:s3:::{name}/*"])]

    read = [
        # provisioning lists the buckets to see that the warehouse exists (the init created it)
        _statement(["s3:ListAllMyBuckets"], ["arn:aws:s3:::*"]),
        _statement(["s3:ListBucket", "s3:GetBucketLocation"], [f"arn:aws:s3:::{bucket}"]),
        _statement(["s3:GetObject"], [f"arn:aws:s3:::{bucket}/*"]),
    ]
    return {
        "lakebus-warehouse-write": {"Version": "2012-10-17", "Statement": bucket_rw(bucket)},
        "lakebus-warehouse-read": {"Version": "2012-10-17", "Statement": read},
        "lakebus-compute-logs": {"Version": "2012-10-17", "Statement": bucket_rw(logs_bucket)},
    }


def minio_init_script(endpoint: str, bucket: str, logs_bucket: str, dollar: str = "$") -> str:
    """The init's shell script (MinIO's ``mc``): the buckets, the policies, one user per service with its
    policy. Idempotent (an existing bucket, policy or user is updated). ``dollar`` is ``$$`` in compose."""
    d = dollar
    lines = [f'mc alias set local {endpoint} "{d}ROOT_USER" "{d}ROOT_PASSWORD"',
             f"mc mb --ignore-existing local/{bucket}", f"mc mb --ignore-existing local/{logs_bucket}"]
    for name, document in object_store_policies(bucket, logs_bucket).items():
        lines += [f"printf '%s' '{json.dumps(document, separators=(',', ':'))}' > /tmp/{name}.json",
                  f"mc admin policy create local {name} /tmp/{name}.json"]
    for user in OBJECT_STORE_USERS:
        key, secret = user.init_vars
        lines += [f'mc admin user add local "{d}{key}" "{d}{secret}"',
                  # attaching an attached policy is an error to mc: the user already has it
                  f'mc admin policy attach local {user.policy} --user "{d}{key}" || true']
    return "\n".join(lines)
