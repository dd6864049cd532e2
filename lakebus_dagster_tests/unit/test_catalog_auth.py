"""Catalog credentials (issue 31.4): the settings, their way to every client (pyiceberg's props, the
sink's ``${env:…}`` placeholders, the Spark session's and the Spark Connect server's conf), and the
secured profile's catalog gate (its token endpoint and its proxy), against a stand-in fixture.

The real stack's proof is integration/test_secured_profile.py (the ``secured`` stage)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
import requests

from lakebus_dagster.bus.desired import catalog_secrets_config, env_placeholder
from lakebus_dagster.lake.catalog import CatalogAuthError, LakeEndpoints, catalog_auth_props, open_catalog
from lakebus_dagster.lake.spark import connect_server_common, spark_conf
from lakebus_dagster.settings import SettingsError, load_settings
from lakebus_dagster.secret_env import catalog_secrets
from lakebus_dagster.stack.catalog_gate import TokenBook, serve

CREDENTIAL = "lakebus-client:s3cr3t-value-never-shown"


# -- settings ---------------------------------------------------------------------------------------
def test_no_catalog_auth_by_default_and_the_secured_profile_names_its_scope_and_token_endpoint(clean_env):
    settings = load_settings()
    assert (settings.lake.catalog_scope, settings.lake.catalog_oauth2_server_uri) == (None, None)
    assert catalog_secrets() == (None, None)
    clean_env.setenv("LAKEBUS_PROFILE", "secured")
    clean_env.setenv("LAKEBUS_REST_CATALOG_PORT", "35181")
    settings = load_settings()
    assert settings.lake.catalog_scope == "lakebus"
    assert settings.lake.catalog_oauth2_server_uri == "http://127.0.0.1:35181/v1/oauth/tokens"
    clean_env.setenv("LAKEBUS_CATALOG_SCOPE", "PRINCIPAL_ROLE:ALL")
    clean_env.setenv("LAKEBUS_CATALOG_OAUTH2_SERVER_URI", "https://idp.example.test/oauth/token")
    settings = load_settings()
    assert settings.lake.catalog_scope == "PRINCIPAL_ROLE:ALL"
    assert settings.lake.catalog_oauth2_server_uri == "https://idp.example.test/oauth/token"


def test_a_malformed_or_doubled_catalog_secret_is_one_line_without_its_value(clean_env):
    clean_env.setenv("LAKEBUS_CATALOG_CREDENTIAL", "only-a-secret-value")
    with pytest.raises(SettingsError) as caught:
        catalog_secrets()
    assert "LAKEBUS_CATALOG_CREDENTIAL" in str(caught.value) and "only-a-secret-value" not in str(caught.value)
    clean_env.setenv("LAKEBUS_CATALOG_CREDENTIAL", CREDENTIAL)
    clean_env.setenv("LAKEBUS_CATALOG_TOKEN", "tok-value")
    with pytest.raises(SettingsError, match="both set") as caught:
        catalog_secrets()
    assert "tok-value" not in str(caught.value) and "\n" not in str(caught.value)
    clean_env.setenv("LAKEBUS_CATALOG_SCOPE", 'bad"scope')
    with pytest.raises(SettingsError, match="LAKEBUS_CATALOG_SCOPE"):
        load_settings()


# -- every client -----------------------------------------------------------------------------------
def _endpoints(**auth) -> LakeEndpoints:
    return LakeEndpoints("http://127.0.0.1:1", "s3://warehouse/", "http://127.0.0.1:2", "us-east-1", "ak", "sk", **auth)


def test_pyiceberg_and_spark_get_the_credential_the_server_file_of_deploy_never(clean_env):
    ep = _endpoints(credential=CREDENTIAL, scope="lakebus", oauth2_server_uri="http://127.0.0.1:1/v1/oauth/tokens")
    assert catalog_auth_props(ep) == {"credential": CREDENTIAL, "scope": "lakebus",
                                      "oauth2-server-uri": "http://127.0.0.1:1/v1/oauth/tokens"}
    assert CREDENTIAL not in repr(ep)
    embedded = spark_conf(ep, master="local[1]", driver_memory="1g", jars=[])
    assert embedded["spark.sql.catalog.lake.credential"] == CREDENTIAL
    assert embedded["spark.sql.catalog.lake.scope"] == "lakebus"
    assert embedded["spark.sql.catalog.lake.oauth2-server-uri"] == "http://127.0.0.1:1/v1/oauth/tokens"
    import re

    assert re.search(embedded["spark.redaction.regex"], "spark.sql.catalog.lake.credential")  # hidden in Spark's UI
    # deploy render's server conf (a ConfigMap): the scope and endpoint, no secret
    common = connect_server_common(ep)
    assert common["spark.sql.catalog.lake.scope"] == "lakebus"
    assert not [k for k in common if k.endswith((".credential", ".token"))]
    # the local stack's server file holds the secret (mode 0600): unit/test_deploy_files_run.py
    token = spark_conf(_endpoints(token="tok"), master="local[1]", driver_memory="1g", jars=[])
    assert token["spark.sql.catalog.lake.token"] == "tok" and "spark.sql.catalog.lake.credential" not in token
    assert not [k for k in spark_conf(_endpoints(), master="local[1]", driver_memory="1g", jars=[])
                if k.endswith((".credential", ".token", ".scope", ".oauth2-server-uri"))]


def test_the_sink_gets_placeholders_only_when_set(clean_env):
    lake = SimpleNamespace(catalog_uri="http://c", warehouse="s3://w/", region="r", s3_endpoint="http://s")
    assert not [k for k in catalog_secrets_config(lake) if "credential" in k or "token" in k or "scope" in k]
    lake.catalog_credential, lake.catalog_scope, lake.catalog_oauth2_server_uri = CREDENTIAL, "lakebus", "http://c/t"
    cfg = catalog_secrets_config(lake)
    assert cfg["iceberg.catalog.credential"] == env_placeholder("LAKEBUS_CATALOG_CREDENTIAL") == "${env:LAKEBUS_CATALOG_CREDENTIAL}"
    assert (cfg["iceberg.catalog.scope"], cfg["iceberg.catalog.oauth2-server-uri"]) == ("lakebus", "http://c/t")
    assert CREDENTIAL not in json.dumps(cfg) and "iceberg.catalog.token" not in cfg
    lake.catalog_credential, lake.catalog_token = None, "tok-value"
    assert catalog_secrets_config(lake)["iceberg.catalog.token"] == "${env:LAKEBUS_CATALOG_TOKEN}"


def test_the_resources_carry_the_credential_as_an_env_var_and_the_sink_config_its_placeholder(clean_env):
    import dagster as dg

    from lakebus_dagster.bus.desired import sink_connector_config
    from lakebus_dagster.defs.environment import build_resources

    clean_env.setenv("LAKEBUS_S3_ACCESS_KEY_ID", "ak")
    clean_env.setenv("LAKEBUS_S3_SECRET_ACCESS_KEY", "sk")
    clean_env.setenv("LAKEBUS_SPARK_REMOTE", "sc://127.0.0.1:1")
    clean_env.setenv("LAKEBUS_CATALOG_CREDENTIAL", CREDENTIAL)
    clean_env.setenv("LAKEBUS_CATALOG_SCOPE", "lakebus")
    resources = build_resources()
    iceberg = resources["iceberg"]
    assert iceberg.catalog_credential == dg.EnvVar("LAKEBUS_CATALOG_CREDENTIAL") and iceberg.catalog_token is None
    assert resources["spark"].catalog_credential == dg.EnvVar("LAKEBUS_CATALOG_CREDENTIAL")
    cfg = sink_connector_config(resources["layout"].layout(), iceberg.as_seen_by_connect())
    assert cfg["iceberg.catalog.credential"] == "${env:LAKEBUS_CATALOG_CREDENTIAL}" and cfg["iceberg.catalog.scope"] == "lakebus"
    assert CREDENTIAL not in json.dumps(cfg) and "s3cr3t" not in json.dumps(cfg)


# -- the gate ---------------------------------------------------------------------------------------
class _Fixture(BaseHTTPRequestHandler):
    """Stands in for the REST fixture: /v1/config answers, and says which Authorization it saw."""

    seen: list[str | None] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps({"defaults": {}, "overrides": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def gate():
    fixture = ThreadingHTTPServer(("127.0.0.1", 0), _Fixture)
    threading.Thread(target=fixture.serve_forever, daemon=True).start()
    book = TokenBook("lakebus-client", "s3cr3t-value-never-shown", "lakebus", lifetime_s=60)
    server = serve("127.0.0.1", 0, f"http://127.0.0.1:{fixture.server_address[1]}", book)
    yield f"http://127.0.0.1:{server.server_address[1]}", book
    server.shutdown()
    fixture.shutdown()


def _token(url: str, **form) -> requests.Response:
    return requests.post(f"{url}/v1/oauth/tokens", data=form, timeout=5)


def test_the_gate_refuses_requests_without_a_valid_token(gate):
    url, _ = gate
    assert requests.get(f"{url}/lakebus-gate/health", timeout=5).json() == {"upstream": "ok"}  # the stack's probe
    resp = requests.get(f"{url}/v1/config", timeout=5)
    assert resp.status_code == 401 and 'error="invalid_token"' in resp.headers["WWW-Authenticate"]
    assert resp.json()["error"]["type"] == "NotAuthorizedException"
    assert requests.get(f"{url}/v1/config", headers={"Authorization": "Bearer made-up"}, timeout=5).status_code == 401
    wrong = _token(url, grant_type="client_credentials", client_id="lakebus-client", client_secret="wrong", scope="lakebus")
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    assert "s3cr3t" not in wrong.text
    scope = _token(url, grant_type="client_credentials", client_id="lakebus-client",
                   client_secret="s3cr3t-value-never-shown", scope="catalog")
    assert scope.status_code == 400 and scope.json()["error"] == "invalid_scope"
    assert _token(url, grant_type="password").json()["error"] == "unsupported_grant_type"


def test_the_gate_issues_tokens_refreshes_them_and_forwards_without_the_token(gate):
    url, book = gate
    issued = _token(url, grant_type="client_credentials", client_id="lakebus-client",
                    client_secret="s3cr3t-value-never-shown", scope="catalog lakebus")
    assert issued.status_code == 200 and issued.json()["token_type"] == "bearer" and issued.json()["expires_in"] == 60
    token = issued.json()["access_token"]
    _Fixture.seen.clear()
    resp = requests.get(f"{url}/v1/config", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    assert resp.status_code == 200 and resp.json() == {"defaults": {}, "overrides": {}}
    assert _Fixture.seen == [None]  # the client's token stays at the gate
    # Iceberg's Java client refreshes by token exchange; HTTP Basic client auth works too
    exchanged = _token(url, grant_type="urn:ietf:params:oauth:grant-type:token-exchange", subject_token=token,
                       subject_token_type="urn:ietf:params:oauth:token-type:access_token", scope="lakebus")
    assert exchanged.status_code == 200 and book.valid(exchanged.json()["access_token"])
    basic = base64.b64encode(b"lakebus-client:s3cr3t-value-never-shown").decode()
    assert requests.post(f"{url}/v1/oauth/tokens", data={"grant_type": "client_credentials", "scope": "lakebus"},
                         headers={"Authorization": f"Basic {basic}"}, timeout=5).status_code == 200


def test_pyiceberg_authenticates_at_the_gate_and_a_wrong_secret_fails_in_one_line_naming_the_catalog(gate):
    url, _ = gate
    ep = LakeEndpoints(url, "s3://warehouse/", "http://127.0.0.1:2", "us-east-1", "ak", "sk",
                       credential=CREDENTIAL, scope="lakebus", oauth2_server_uri=f"{url}/v1/oauth/tokens")
    open_catalog(ep)  # fetches a token, then reads /v1/config through the gate
    wrong = LakeEndpoints(url, "s3://warehouse/", "http://127.0.0.1:2", "us-east-1", "ak", "sk",
                          credential="lakebus-client:not-the-secret", scope="lakebus")
    with pytest.raises(CatalogAuthError) as caught:
        open_catalog(wrong, "lakebus")
    message = str(caught.value)
    assert message.startswith(f"Iceberg REST catalog 'lakebus' at {url} refused lakebus") and "\n" not in message
    assert "invalid_client" in message and "LAKEBUS_CATALOG_CREDENTIAL" in message and "not-the-secret" not in message
    with pytest.raises(CatalogAuthError, match="set LAKEBUS_CATALOG_CREDENTIAL"):
        open_catalog(LakeEndpoints(url, "s3://warehouse/", "http://127.0.0.1:2", "us-east-1", "ak", "sk"))


def test_a_python_module_service_runs_with_the_stack_markers(tmp_path):
    import sys

    from lakebus_dagster.stack.service import Service

    svc = Service(name="catalog-gate", port=1, main_class="lakebus_dagster.stack.catalog_gate", classpath_dirs=[], heap="",
                  health=lambda: True, health_text="", args=["--port", "1"], python_module=True)
    argv = svc.argv(None, tmp_path, "java", ["-Dlakebus.service=catalog-gate", "-Dlakebus.state=/s"])  # type: ignore[arg-type]
    assert argv == [sys.executable, "-m", "lakebus_dagster.stack.catalog_gate", "-Dlakebus.service=catalog-gate",
                    "-Dlakebus.state=/s", "--port", "1"]


def test_a_restarted_gate_still_accepts_the_tokens_it_issued_until_they_expire():
    """The sink and the Spark Connect server hold their token for its lifetime: a gate restart must not refuse them."""
    token = TokenBook("c", "s", "lakebus", lifetime_s=60).issue()
    assert TokenBook("c", "s", "lakebus", lifetime_s=60).valid(token)
    assert not TokenBook("c", "other-secret", "lakebus", lifetime_s=60).valid(token)
    assert not TokenBook("c", "s", "lakebus", lifetime_s=-1).valid(TokenBook("c", "s", "lakebus", lifetime_s=-1).issue())
    assert not TokenBook("c", "s", "lakebus", lifetime_s=60).valid(token[:-1] + ("0" if token[-1] != "0" else "1"))
