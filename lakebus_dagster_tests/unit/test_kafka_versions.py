"""One Kafka minor everywhere: the local stack's Kafka (infra/maven/pom.xml ``kafka.version``), the Strimzi
resources of deploy/k8s/strimzi (``Kafka.spec.kafka.version``, its ``metadataVersion``, ``KafkaConnect.spec.version``)
and the Kafka images deploy/ names.

The versions must name the same major.minor (4.3.1 and 4.3.0 agree, 4.3.1 and 4.2.1 do not): the local stack is
where lakebus's Connect plugins, the Iceberg sink and Debezium are tested, so production must run that minor's
broker and Connect runtime. The patch may differ, because a Strimzi release supports only the patches it lists
and the registry the stack builds from may serve another. The Strimzi resources' version must also be one the
Strimzi release deploy/README.md installs lists as supported (the operator refuses any other).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "infra" / "maven" / "pom.xml"
STRIMZI = ROOT / "deploy" / "k8s" / "strimzi"
README = ROOT / "deploy" / "README.md"
#: where deploy/ names an upstream Kafka image (``apache/kafka:<version>``)
KAFKA_IMAGE_FILES = (ROOT / "deploy" / "compose.yaml", ROOT / "deploy" / "values.yaml",
                     ROOT / "deploy" / "connect" / "Dockerfile", README)

#: Strimzi release -> the Kafka versions it supports: the entries with ``supported: true`` of
#: kafka-versions.yaml at the release's tag of github.com/strimzi/strimzi-kafka-operator (its CHANGELOG.md says
#: the same, "Add support for Apache Kafka ..."). Add a row when deploy/ moves to a newer release.
STRIMZI_KAFKA_VERSIONS: dict[str, tuple[str, ...]] = {
    "0.47.0": ("3.9.0", "3.9.1", "4.0.0"),
    "0.48.0": ("4.0.0", "4.1.0"),
    "0.49.0": ("4.0.0", "4.0.1", "4.1.0", "4.1.1"),
    "0.49.1": ("4.0.0", "4.0.1", "4.1.0", "4.1.1"),
    "0.50.0": ("4.0.0", "4.0.1", "4.1.0", "4.1.1"),
    "0.50.1": ("4.0.0", "4.0.1", "4.1.0", "4.1.1"),
    "0.51.0": ("4.1.0", "4.1.1", "4.2.0"),
    "1.0.0": ("4.1.0", "4.1.1", "4.1.2", "4.2.0"),
    "1.0.1": ("4.1.0", "4.1.1", "4.1.2", "4.2.0"),
    "1.1.0": ("4.2.0", "4.2.1", "4.3.0"),
    "1.2.0": ("4.2.0", "4.2.1", "4.3.0", "4.3.1"),
}


def minor(version: str) -> str:
    """``major.minor`` of a Kafka version or metadata version (``4.3.1`` and ``4.3-IV0`` -> ``4.3``)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    assert found, f"not a Kafka version: {version!r}"
    return f"{found.group(1)}.{found.group(2)}"


def maven_kafka_version(pom: Path = POM) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    element = ET.parse(pom).getroot().find("m:properties/m:kafka.version", ns)
    assert element is not None and element.text, f"{pom}: no <kafka.version> property"
    return element.text.strip()


def strimzi_release(readme: Path = README) -> str:
    """The Strimzi operator release deploy/README.md's install step installs (``helm install strimzi ... --version X``)."""
    found = re.findall(r"^helm install strimzi \S+ --version (\S+)", readme.read_text(), re.MULTILINE)
    assert len(found) == 1, f"{readme}: expected one `helm install strimzi ... --version X` line, found {found}"
    return found[0]


def strimzi_versions(strimzi_dir: Path = STRIMZI) -> dict[str, str]:
    """Every Kafka version the Strimzi resources name, by where they name it."""
    named: dict[str, str] = {}
    for path in sorted(strimzi_dir.glob("*.yaml")):
        for doc in (d for d in yaml.safe_load_all(path.read_text()) if d):
            spec = doc.get("spec", {})
            if doc.get("kind") == "Kafka":
                named[f"{path.name}: Kafka.spec.kafka.version"] = str(spec["kafka"]["version"])
                if "metadataVersion" in spec["kafka"]:
                    named[f"{path.name}: Kafka.spec.kafka.metadataVersion"] = str(spec["kafka"]["metadataVersion"])
            elif doc.get("kind") in ("KafkaConnect", "KafkaMirrorMaker2") and "version" in spec:
                named[f"{path.name}: {doc['kind']}.spec.version"] = str(spec["version"])
    return named


def image_versions(files: tuple[Path, ...] = KAFKA_IMAGE_FILES) -> dict[str, str]:
    return {f"{path.relative_to(ROOT)}: apache/kafka:{tag}": tag
            for path in files for tag in re.findall(r"apache/kafka:(\d[\w.-]*)", path.read_text())}


def version_problems(maven: str, release: str, named: dict[str, str], images: dict[str, str],
                     table: dict[str, tuple[str, ...]] = STRIMZI_KAFKA_VERSIONS) -> list[str]:
    """What disagrees: a different Kafka minor than the stack's, or a version the Strimzi release does not support."""
    problems = [f"{where}: {version} is not Kafka {minor(maven)}.x (infra/maven/pom.xml kafka.version {maven})"
                for where, version in {**named, **images}.items() if minor(version) != minor(maven)]
    if release not in table:
        problems.append(f"Strimzi {release}: not in STRIMZI_KAFKA_VERSIONS (add its supported Kafka versions)")
        return problems
    problems += [f"{where}: Strimzi {release} does not support Kafka {version} (it supports {', '.join(table[release])})"
                 for where, version in named.items() if not where.endswith("metadataVersion") and version not in table[release]]
    if not any(minor(v) == minor(maven) for v in table[release]):
        problems.append(f"Strimzi {release} supports no Kafka {minor(maven)}.x (it supports {', '.join(table[release])})")
    return problems


def test_the_stack_and_deploy_name_one_kafka_minor_that_strimzi_supports():
    named = strimzi_versions()
    assert any(k.endswith("Kafka.spec.kafka.version") for k in named) and any("KafkaConnect" in k for k in named), named
    images = image_versions()
    assert images, "deploy/ names no apache/kafka image"
    assert version_problems(maven_kafka_version(), strimzi_release(), named, images) == []


def test_a_different_minor_or_an_unsupported_version_is_found():
    named = {"kafka.yaml: Kafka.spec.kafka.version": "4.3.1", "kafka.yaml: Kafka.spec.kafka.metadataVersion": "4.3-IV0",
             "kafka-connect.yaml: KafkaConnect.spec.version": "4.3.1"}
    images = {"compose.yaml: apache/kafka:4.3.1": "4.3.1"}
    assert version_problems("4.3.1", "1.2.0", named, images) == []
    assert version_problems("4.3.0", "1.2.0", named, images) == []  # the same minor: another patch is fine
    # the stack moved to another minor, deploy did not (and the named Strimzi release has no 4.4)
    moved = version_problems("4.4.0", "1.2.0", named, images)
    assert len(moved) == 5 and moved[-1].startswith("Strimzi 1.2.0 supports no Kafka 4.4.x"), moved
    # one resource left behind on the old minor (and unsupported by the release)
    behind = {**named, "kafka-connect.yaml: KafkaConnect.spec.version": "3.9.1"}
    problems = version_problems("4.3.1", "1.2.0", behind, images)
    assert any("KafkaConnect.spec.version: 3.9.1 is not Kafka 4.3.x" in p for p in problems), problems
    assert any("Strimzi 1.2.0 does not support Kafka 3.9.1" in p for p in problems), problems
    # the right minor, but a patch the named release does not list
    assert version_problems("4.2.1", "1.0.1", {k: v.replace("4.3.1", "4.2.1").replace("4.3-", "4.2-") for k, v in named.items()},
                            {}) == ["kafka.yaml: Kafka.spec.kafka.version: Strimzi 1.0.1 does not support Kafka 4.2.1 (it supports "
                                    "4.1.0, 4.1.1, 4.1.2, 4.2.0)",
                                    "kafka-connect.yaml: KafkaConnect.spec.version: Strimzi 1.0.1 does not support Kafka 4.2.1 "
                                    "(it supports 4.1.0, 4.1.1, 4.1.2, 4.2.0)"]
    # a release the table does not know
    assert version_problems("4.3.1", "9.9.9", named, images) == [
        "Strimzi 9.9.9: not in STRIMZI_KAFKA_VERSIONS (add its supported Kafka versions)"]
    # an image on another minor
    assert version_problems("4.3.1", "1.2.0", named, {"compose.yaml: apache/kafka:3.9.2": "3.9.2"}) == [
        "compose.yaml: apache/kafka:3.9.2: 3.9.2 is not Kafka 4.3.x (infra/maven/pom.xml kafka.version 4.3.1)"]


def test_the_readers_find_what_deploy_names():
    assert minor("4.3-IV0") == minor("4.3.1") == "4.3"
    assert re.fullmatch(r"\d+\.\d+\.\d+", maven_kafka_version())
    assert strimzi_release() in STRIMZI_KAFKA_VERSIONS
