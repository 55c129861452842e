"""The Dockerfile and docker-compose.yml say what the README promises (no Docker engine
is needed to check that; CI has none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from service.auth import Role, TokenTable
from service.errors import ConfigError
from service.serving import check_bind
from service.settings import Settings, known_variables
from service.store.redis.tuning import LISTPACK_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_runs_redis_with_aof_two_replicas_and_an_opt_in_loadgen() -> None:
    services = _compose()["services"]
    redis_cmd = services["redis"]["command"]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    assert redis_cmd[redis_cmd.index("--appendfsync") + 1] == "always"
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["api"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["loadgen"]["profiles"] == ["loadgen"]
    assert services["loadgen"]["command"][:2] == ["crawlsched", "loadgen"]


def test_compose_runs_redis_with_the_stores_listpack_settings() -> None:
    """docs/operations.md, "Redis memory": the values the store checks at start."""
    redis_cmd = _compose()["services"]["redis"]["command"]
    for name, value in LISTPACK_SETTINGS.items():
        assert int(redis_cmd[redis_cmd.index(f"--{name}") + 1]) >= value, name


def test_compose_runs_a_worker_on_the_api_store() -> None:
    """A Redis deployment needs a worker (the API's /healthz says 503 without one)."""
    services = _compose()["services"]
    worker = services["worker"]
    assert worker["command"][:2] == ["crawlsched", "worker"]
    assert "profiles" not in worker  # started by a plain `docker compose up`
    assert worker["environment"] == services["api"]["environment"]
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"


def test_compose_sets_only_real_settings() -> None:
    env = _compose()["services"]["api"]["environment"]
    fields = {f"CRAWLSCHED_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= fields, set(env) - fields
    assert env["CRAWLSCHED_STORE"].startswith("redis://")


def test_image_is_slim_non_root_and_health_checked() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert "\nUSER crawlsched" in text
    assert "HEALTHCHECK" in text and "/healthz" in text


def _default(value: str) -> str:
    """The default of a compose ``${VAR:-default}`` value."""
    assert value.startswith("${") and ":-" in value and value.endswith("}"), value
    return value[value.index(":-") + 2 : -1]


def test_compose_api_has_tokens_and_the_loadgen_an_admin_one() -> None:
    services = _compose()["services"]
    tokens = _default(services["api"]["environment"]["CRAWLSCHED_AUTH_TOKENS"])
    settings = Settings(auth_tokens=SecretStr(tokens))
    loadgen_env = services["loadgen"]["environment"]
    assert set(loadgen_env) <= set(known_variables())
    loadgen_token = _default(loadgen_env["CRAWLSCHED_TOKEN"])
    assert TokenTable(settings.auth_pairs()).role_of(loadgen_token) is Role.ADMIN


def test_image_binds_every_interface_only_with_tokens() -> None:
    text = (ROOT / "Dockerfile").read_text()
    cmd = json.loads(text[text.index("\nCMD ") + 5 :].splitlines()[0])
    assert cmd[:2] == ["crawlsched", "serve"]
    host = cmd[cmd.index("--host") + 1]
    tokens = _default(_compose()["services"]["api"]["environment"]["CRAWLSCHED_AUTH_TOKENS"])
    assert check_bind(host, Settings(auth_tokens=SecretStr(tokens)), insecure=False) is False
    with pytest.raises(ConfigError, match="refusing to bind"):
        check_bind(host, Settings(), insecure=False)


# -- the monitoring profile: Prometheus, Grafana, the dashboard and the alerts ----------------

MONITORING = ("prometheus", "grafana")
#: Labels Prometheus adds to every scraped series, and metrics of its own.
SCRAPE_LABELS = {"instance", "job"}
PROMETHEUS_OWN = {"up"}
#: Grafana's interval variables, as Grafana substitutes them before the query is sent.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "10s", "$__range": "1h"}


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _mounts(service: str) -> dict[str, Path]:
    """Container path -> repository path of a service's bind mounts (``./...``)."""
    out = {}
    for volume in _compose()["services"][service]["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            out[target] = ROOT / source
    return out


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Sample names /metrics exports after some traffic, with their label names.

    A real app (memory store) is driven through every use case first: registration,
    dispatch, results (one failed), clicks, signals, an explanation, a refused and an
    unmatched request, a learner pass and a rescoring pass.
    """
    import asyncio

    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from service.app import create_app
    from service.clock import ManualClock
    from service.scheduler.fold import fold_now
    from service.scheduler.learning import learn_once
    from service.scheduler.rescoring import rescore_once

    async def scrape() -> str:
        clock = ManualClock(1_700_000_000.0)
        app = create_app(Settings(lease_ttl_s=60.0), clock=clock)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://crawlsched") as api:
            urls = [{"url": f"https://h{i % 3}.example/{i}"} for i in range(12)]
            assert (await api.post("/urls", json={"urls": urls})).is_success
            leases = (await api.get("/next", params={"n": 5})).json()["leases"]
            clock.advance(10.0)
            results = [
                {"url": x["url"], "lease_id": x["lease_id"], "fetched_at": clock.now(),
                 "status": 500 if k == 0 else 200, "changed": True}
                for k, x in enumerate(leases)
            ]  # fmt: skip
            assert (await api.post("/crawl-result", json={"results": results})).is_success
            events = [{"url": u["url"], "time": clock.now()} for u in urls]
            assert (await api.post("/click", json={"clicks": events})).is_success
            assert (await api.post("/signal", json={"signals": events})).is_success
            await fold_now(app.state.context)
            assert (await api.get(f"/urls/{urls[0]['url']}")).is_success
            assert (await api.get("/no/such/route")).status_code == 404
            assert (await api.get("/next", params={"n": 0})).status_code == 422
            await learn_once(app.state.context)
            await rescore_once(app.state.context)
            return (await api.get("/metrics")).text

    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(asyncio.run(scrape())):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def _check_query(expr: str, exported: dict[str, set[str]], routes: set[str]) -> set[str]:
    """Parse a PromQL query; every metric it names is exported (or Prometheus's own),
    with the labels it matches or groups by.  Returns the metric names."""
    import promql_parser

    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    tree = promql_parser.parse(expr)  # ValueError on a syntax error
    nodes: list[Any] = []
    promql_parser.walk(tree, lambda node: nodes.append(node))
    metrics: set[str] = set()
    labels: set[str] = set(SCRAPE_LABELS)
    for node in nodes:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name
            assert name in exported or name in PROMETHEUS_OWN, f"{name} is not exported: {expr}"
            metrics.add(name)
            known = exported.get(name, set()) | SCRAPE_LABELS
            labels |= known
            for m in node.matchers.matchers:
                assert m.name in known, f"{name} has no label {m.name}: {expr}"
                if m.name == "route":
                    assert m.value in routes, f"no route {m.value}: {expr}"
    for node in nodes:
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            if node.modifier.type == promql_parser.AggModifierType.By:
                missing = set(node.modifier.labels) - labels
                assert not missing, f"grouped by unknown labels {missing}: {expr}"
    return metrics


def _routes() -> set[str]:
    from service.app import create_app
    from service.observability import flat_routes

    return {getattr(r, "path", "") for r in flat_routes(create_app(Settings()).routes)}


def _dashboard() -> dict[str, Any]:
    data = json.loads((ROOT / "deploy/grafana/dashboards/crawlsched.json").read_text())
    assert isinstance(data, dict)
    return data


def test_monitoring_profile_is_opt_in_and_its_files_exist() -> None:
    compose = _compose()
    services = compose["services"]
    for name in MONITORING:
        service = services[name]
        assert service["profiles"] == ["monitoring"]
        assert ":" in service["image"] and not service["image"].endswith(":latest")
        for target, source in _mounts(name).items():
            assert source.exists(), f"{name} mounts {source}, which is missing"
            assert target.startswith("/")
        for volume in service["volumes"]:
            source = volume.split(":")[0]
            if not source.startswith("./"):
                assert source in compose["volumes"], f"undeclared volume {source}"
        for port in service["ports"]:
            assert port.startswith("127.0.0.1:"), "published on this machine only"
        depends = service.get("depends_on", [])
        assert set(depends) <= set(services), depends
    # only the monitoring services are in the profile: the API and Redis start without it
    in_profile = {n for n, s in services.items() if "monitoring" in s.get("profiles", [])}
    assert in_profile == set(MONITORING)


def test_prometheus_scrapes_every_replica_with_a_read_token() -> None:
    mounts = _mounts("prometheus")
    config = _yaml(mounts["/etc/prometheus/prometheus.yml"])
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"crawlsched", "crawlsched-worker"}
    (worker_sd,) = jobs["crawlsched-worker"]["dns_sd_configs"]
    command = _compose()["services"]["worker"]["command"]
    assert worker_sd["names"] == ["worker"]
    assert worker_sd["port"] == int(command[command.index("--metrics-port") + 1])
    job = jobs["crawlsched"]
    assert job["metrics_path"] == "/metrics"
    (sd,) = job["dns_sd_configs"]
    # one A record per replica of the compose service "api": every replica a target
    assert sd["names"] == ["api"] and sd["type"] == "A" and sd["port"] == 8000
    token_file = mounts[job["authorization"]["credentials_file"]]
    token = token_file.read_text().strip()
    tokens = _default(_compose()["services"]["api"]["environment"]["CRAWLSCHED_AUTH_TOKENS"])
    role = TokenTable(Settings(auth_tokens=SecretStr(tokens)).auth_pairs()).role_of(token)
    assert role is Role.READ
    for rules in config["rule_files"]:
        assert rules in mounts, f"rule file {rules} is not mounted"


def test_grafana_provisioning_points_at_prometheus_and_the_dashboard() -> None:
    mounts = _mounts("grafana")
    provisioning = mounts["/etc/grafana/provisioning"]
    (source,) = _yaml(provisioning / "datasources/prometheus.yml")["datasources"]
    assert _yaml(provisioning / "datasources/prometheus.yml")["apiVersion"] == 1
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert source["access"] == "proxy"
    providers = _yaml(provisioning / "dashboards/crawlsched.yml")
    assert providers["apiVersion"] == 1
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    folder = mounts[provider["options"]["path"]]
    assert (folder / "crawlsched.json").exists()
    env = _compose()["services"]["grafana"]["environment"]
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/crawlsched.json"
    # every panel reads the provisioned data source
    for panel in _dashboard()["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": source["uid"]}
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]


def test_dashboard_is_a_provisionable_grafana_dashboard() -> None:
    dash = _dashboard()
    assert dash["id"] is None and dash["uid"] and dash["title"]
    assert isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dash["panels"]:
        assert panel["type"] in {"timeseries", "stat", "gauge", "table", "bargauge"}
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, panel["title"]
        area = {(g["x"] + i, g["y"] + j) for i in range(g["w"]) for j in range(g["h"])}
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_every_dashboard_query_names_an_exported_metric(exported: dict[str, set[str]]) -> None:
    routes = _routes()
    named: set[str] = set()
    for panel in _dashboard()["panels"]:
        for target in panel["targets"]:
            named |= _check_query(target["expr"], exported, routes)
    exprs = " ".join(t["expr"] for p in _dashboard()["panels"] for t in p["targets"])
    # the panels the runbook refers to
    for metric in (
        "crawlsched_lambda0", "crawlsched_host_lambda", "crawlsched_dispatched_total",
        "crawlsched_dispatch_requested_total", "crawlsched_events_total",
        "crawlsched_http_request_duration_seconds_bucket", "crawlsched_due_backlog",
        "crawlsched_leases_active", "crawlsched_freshness_estimate",
        "crawlsched_learner_last_cycle_timestamp_seconds", "crawlsched_relearn_queue_urls",
        "crawlsched_fold_lag_seconds", "crawlsched_worker_up",
    ):  # fmt: skip
        assert metric in named, f"no panel shows {metric}"
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_every_alert_names_an_exported_metric(exported: dict[str, set[str]]) -> None:
    routes = _routes()
    config = _yaml(ROOT / "deploy/prometheus/alerts.yml")
    rules = [rule for group in config["groups"] for rule in group["rules"]]
    assert rules
    for rule in rules:
        assert rule["alert"].startswith("Crawlsched") and rule["labels"]["severity"]
        assert rule["annotations"]["summary"]
        _check_query(rule["expr"], exported, routes)
