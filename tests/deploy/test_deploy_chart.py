"""The Helm chart, linted and rendered by Helm's own library (helm-python-sdk, no cluster), every
manifest validated against the Kubernetes schemas, in each of its modes."""

from __future__ import annotations

import base64
import functools
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import pytest
import yaml
from crd_helpers import crd_schema
from deploy_helpers import (
    ALERTS,
    CHART,
    DASHBOARD,
    LIFECYCLE,
    RANKS,
    SIDECAR_EXAMPLE,
    deploy_yaml,
    load_generator,
    run_promtool,
    yaml_load,
    yaml_load_all,
)

from exporter.cli import flag_overrides, parser
from exporter.config import DEFAULT_PORT, load_settings

RELEASE = "tje"
NAMESPACE = "monitoring"
FULLNAME = f"{RELEASE}-training-job-exporter"
# 1.28: the first release that labels StatefulSet pods with apps.kubernetes.io/pod-index.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

AIHC_TARGET = {"name": "bj-pool-a", "resource_pool_id": "cce-1uji3ib5"}
ALAYA_TARGET = {"name": "alaya-main", "jobs": [{"id": "job-1", "pods": ["worker-0"]}]}

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "demo": {"demo": True},
    "credentials": {
        "config": {"aihc": [AIHC_TARGET], "alaya": [ALAYA_TARGET]},
        "credentials": {"aihcAccessKeyId": "AK", "aihcSecretAccessKey": "SK", "alayaApiKey": "K"},
    },
    "existing-secret": {"config": {"aihc": [AIHC_TARGET]}, "existingSecret": "aihc-creds"},
    "service-monitor": {
        "config": {"aihc": [AIHC_TARGET]},
        "serviceMonitor": {
            "enabled": True,
            "additionalLabels": {"release": "kube-prometheus"},
            "metricRelabelings": [{"action": "labeldrop", "regex": "image"}],
        },
    },
    "rules-and-dashboard": {
        "demo": True,
        "prometheusRule": {"enabled": True, "additionalLabels": {"role": "alert-rules"}},
        "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Training"}},
    },
    "statefulset": {
        "mode": "statefulset",
        "replicas": 3,
        "config": {"aihc": [AIHC_TARGET]},
        "serviceMonitor": {"enabled": True},
    },
    "sidecar": {
        "mode": "sidecar",
        "config": {"alaya": [ALAYA_TARGET]},
        "credentials": {"alayaApiKey": "K"},
        "podMonitor": {"enabled": True, "selector": {"matchLabels": {"app": "trainer"}}},
        "prometheusRule": {"enabled": True},
    },
    # tests/deploy/test_deploy_backfill_job.py
    "backfill-job": {
        "config": {"aihc": [AIHC_TARGET]},
        "credentials": {"aihcAccessKeyId": "AK", "aihcSecretAccessKey": "SK"},
        "backfill": {
            "enabled": True,
            "remoteWrite": {
                "url": "https://mimir.example/api/v1/push",
                "window": "30d",
                "headers": {"X-Scope-OrgID": "team-a"},
                "username": "backfill",
                "secret": "remote-write-creds",
                "passwordKey": "password",
                "caKey": "ca.crt",
            },
            "existingClaim": "backfill-state",
        },
    },
}


def manifests(rendered: dict[str, str]) -> list[dict[str, Any]]:
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [doc for doc in yaml_load_all(text) if doc]
    return docs


def render(values: dict[str, Any], chart: Path = CHART) -> list[dict[str, Any]]:
    with helm_python.Chart.load(chart) as loaded:
        return manifests(loaded.render(values=values, name=RELEASE, namespace=NAMESPACE))


def kinds(docs: list[dict[str, Any]]) -> set[str]:
    return {doc["kind"] for doc in docs}


def get(docs: list[dict[str, Any]], kind: str, name: str = FULLNAME) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module", autouse=True)
def schemas_read_once() -> Iterator[None]:
    """kubernetes_validate reads and decodes its schema files on every validate(), the 1 MB
    definitions file of the version included: most of this module's CPU, for the same few
    files. Here each file is decoded once a module (the validators only read them)."""
    with pytest.MonkeyPatch.context() as patch:
        utils = kubernetes_validate.utils
        patch.setattr(utils, "schema_contents", functools.cache(utils.schema_contents))
        yield


def schema_problems(doc: dict[str, Any]) -> list[str]:
    """Kubernetes' schemas (strict: unknown fields fail) for its kinds; ours for the CRDs."""
    where = f"{doc['kind']}/{doc['metadata']['name']}"
    problems = []
    crd = (
        crd_schema(doc["kind"]) if doc["apiVersion"].startswith("monitoring.coreos.com/") else None
    )
    if crd is not None:
        for error in jsonschema.Draft202012Validator(crd).iter_errors(doc):
            problems.append(f"{where}: {error.json_path}: {error.message}")
        # ObjectMeta is ObjectMeta whatever the kind: check it with Kubernetes' own schema.
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            problems.append(f"{where} (Kubernetes {version}): {path}: {error.message}")
    return problems


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The exporter container of the chart's own Deployment or StatefulSet."""
    (workload,) = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    (only,) = workload["spec"]["template"]["spec"]["containers"]
    return dict(only)


def config_file(docs: list[dict[str, Any]]) -> str:
    return str(get(docs, "ConfigMap")["data"]["exporter.yaml"])


def exporter_settings(args: list[str], config_text: str, tmp_path: Path) -> Any:
    """What the real exporter makes of the rendered arguments and configuration file."""
    config_path = tmp_path / "exporter.yaml"
    config_path.write_text(config_text, encoding="utf-8")
    args = [re.sub(r"^--config=.*", f"--config={config_path}", arg) for arg in args]
    return load_settings(str(config_path), flag_overrides(parser().parse_args(args)))


@pytest.fixture
def provider_secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment the Secret gives the container."""
    for name in ("TJE_AIHC_ACCESS_KEY_ID", "TJE_AIHC_SECRET_ACCESS_KEY", "TJE_ALAYA_API_KEY"):
        monkeypatch.setenv(name, "from-secret")
    yield


# --- lint and schema validation, every mode -----------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_chart_lints_clean(scenario: str) -> None:
    report = helm_python.lint(CHART, SCENARIOS[scenario], strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); 2 warnings and 3 errors fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_manifest_passes_the_kubernetes_schemas(scenario: str) -> None:
    docs = render(SCENARIOS[scenario])
    assert docs
    assert [p for doc in docs for p in schema_problems(doc)] == []
    assert all(doc["metadata"]["namespace"] == NAMESPACE for doc in docs)


def test_schema_validation_can_fail() -> None:
    (deployment,) = [d for d in render({}) if d["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    assert schema_problems(deployment)
    (monitor,) = [d for d in render(SCENARIOS["service-monitor"]) if d["kind"] == "ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["honourLabels"] = True
    assert schema_problems(monitor)


def test_values_schema_rejects_typos() -> None:
    report = helm_python.lint(CHART, {"serviceMonitor": {"enable": True}}, strict=True)
    assert any("enable" in error for error in report["errors"])
    report = helm_python.lint(CHART, {"mode": "daemonset"}, strict=True)
    assert any("mode" in error for error in report["errors"])


# --- the default Deployment -----------------------------------------------------------------


def test_default_is_a_deployment_with_service() -> None:
    docs = render({})
    assert kinds(docs) == {"ConfigMap", "Deployment", "Service", "ServiceAccount"}
    deployment, service = get(docs, "Deployment"), get(docs, "Service")
    assert deployment["spec"]["replicas"] == 1
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_container_is_non_root_read_only_with_resources() -> None:
    docs = render({})
    pod = get(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    exporter = container(docs)
    security = exporter["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert exporter["resources"]["requests"]["memory"] and exporter["resources"]["limits"]["memory"]


def test_probes_hit_health_and_readiness_on_the_exporter_port() -> None:
    exporter = container(render({}))
    (port,) = exporter["ports"]
    assert exporter["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": port["name"]}
    assert exporter["startupProbe"]["httpGet"] == {"path": "/-/healthy", "port": port["name"]}
    assert exporter["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": port["name"]}


def test_one_value_sets_the_port_everywhere(tmp_path: Path) -> None:
    docs = render({"port": 19999, "demo": True, "serviceMonitor": {"enabled": True}})
    exporter, service = container(docs), get(docs, "Service")
    (port,) = exporter["ports"]
    assert port["containerPort"] == 19999
    (service_port,) = service["spec"]["ports"]
    assert service_port["port"] == 19999 and service_port["targetPort"] == port["name"]
    assert get(docs, "ServiceMonitor")["spec"]["endpoints"][0]["port"] == service_port["name"]
    settings = exporter_settings(exporter["args"], config_file(docs), tmp_path)
    assert settings.web.listen_address == ":19999"
    default = str(DEFAULT_PORT)
    assert default not in json.dumps([exporter["ports"], exporter["args"], service])


def test_default_port_is_the_exporter_s() -> None:
    assert container(render({}))["ports"][0]["containerPort"] == DEFAULT_PORT


def test_image_comes_from_values() -> None:
    assert container(render({}))["image"] == "training-job-exporter:0.1.0"
    values = {"image": {"repository": "registry.example/tje", "tag": "1.2.3"}}
    assert container(render(values))["image"] == "registry.example/tje:1.2.3"


def test_rendered_configuration_is_valid_for_the_exporter(
    tmp_path: Path, provider_secrets: None
) -> None:
    docs = render(SCENARIOS["credentials"])
    settings = exporter_settings(container(docs)["args"], config_file(docs), tmp_path)
    assert [t.name for t in settings.targets()] == ["bj-pool-a", "alaya-main"]
    assert settings.aihc[0].resource_pool_id == "cce-1uji3ib5"
    secret = settings.aihc[0].secret_access_key
    assert secret is not None and secret.get_secret_value() == "from-secret"


def test_configuration_defaults_come_from_the_example_config() -> None:
    values = {"config": {"web": {"telemetry_path": "/m"}, "aihc": [AIHC_TARGET]}}
    rendered = yaml_load(config_file(render(values)))
    example = deploy_yaml(CHART / "files" / "exporter.yaml")
    assert set(rendered) == set(example)
    # Maps merge key by key; the listen address is the chart's `port`, not a file key.
    expected_web = {k: v for k, v in example["web"].items() if k != "listen_address"}
    assert rendered["web"] == {**expected_web, "telemetry_path": "/m"}
    # Lists replace: the example's targets never reach a release.
    assert (rendered["aihc"], rendered["alaya"]) == ([AIHC_TARGET], [])
    assert rendered["poll_interval"] == example["poll_interval"]


def test_demo_value_runs_the_demo(tmp_path: Path) -> None:
    docs = render({"demo": True})
    assert "--demo" in container(docs)["args"]
    assert exporter_settings(container(docs)["args"], config_file(docs), tmp_path).demo is True


def test_configuration_changes_roll_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        template = get(render(values), "Deployment")["spec"]["template"]
        return str(template["metadata"]["annotations"]["checksum/training-job-exporter"])

    assert checksum({}) == checksum({})
    assert checksum({}) != checksum({"config": {"poll_interval": "30s"}})
    assert checksum({}) != checksum({"credentials": {"alayaApiKey": "new"}})


# --- credentials --------------------------------------------------------------------------


def secret_env(exporter: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The container's environment variables that come from a Secret."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in exporter.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def test_credentials_go_into_a_secret_and_reach_the_container_as_tje_env() -> None:
    docs = render(SCENARIOS["credentials"])
    secret = get(docs, "Secret")
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "aihc-access-key-id": "AK",
        "aihc-secret-access-key": "SK",
        "alaya-api-key": "K",
    }
    env = secret_env(container(docs))
    assert set(env) == {"TJE_AIHC_ACCESS_KEY_ID", "TJE_AIHC_SECRET_ACCESS_KEY", "TJE_ALAYA_API_KEY"}
    for ref in env.values():
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in decoded
    assert not {"AK", "SK", "K"} & set(re.split(r"\W+", config_file(docs)))


def test_existing_secret_is_used_and_none_created() -> None:
    docs = render(SCENARIOS["existing-secret"])
    assert "Secret" not in kinds(docs)
    assert {ref["name"] for ref in secret_env(container(docs)).values()} == {"aihc-creds"}


def test_no_credentials_no_secret_and_no_secret_env() -> None:
    docs = render({"demo": True})
    assert "Secret" not in kinds(docs) and secret_env(container(docs)) == {}


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"aihc": [{**AIHC_TARGET, "secret_access_key": "SK-VALUE"}]}, "aihc[0].secret_access_key"),
        ({"alaya": [{**ALAYA_TARGET, "api_key": "SK-VALUE"}]}, "alaya[0].api_key"),
        ({"web": {"listen_address": "0.0.0.0:1"}}, "web.listen_address"),
    ],
)
def test_refuses_values_that_would_not_apply_or_leak(config: dict[str, Any], key: str) -> None:
    with pytest.raises(helm_python.HelmRenderError) as raised:
        render({"config": config})
    assert f"config.{key}" in str(raised.value)
    assert "SK-VALUE" not in str(raised.value)


def test_deployment_refuses_more_than_one_replica() -> None:
    with pytest.raises(helm_python.HelmRenderError, match="statefulset"):
        render({"replicas": 2})


# --- ServiceMonitor -------------------------------------------------------------------------


def test_service_monitor_scrapes_the_service_and_keeps_the_pod_label() -> None:
    docs = render(SCENARIOS["service-monitor"])
    monitor, service = get(docs, "ServiceMonitor"), get(docs, "Service")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    # The operator's target label `pod` moves aside so the exporter's `pod` label survives.
    assert endpoint["relabelings"][:2] == [
        {"sourceLabels": ["pod"], "targetLabel": "exporter_pod"},
        {"action": "labeldrop", "regex": "pod"},
    ]
    assert endpoint["metricRelabelings"] == [{"action": "labeldrop", "regex": "image"}]


def test_service_monitor_follows_the_telemetry_path() -> None:
    values = {"serviceMonitor": {"enabled": True}, "config": {"web": {"telemetry_path": "/m"}}}
    assert get(render(values), "ServiceMonitor")["spec"]["endpoints"][0]["path"] == "/m"


# --- StatefulSet: sharding ------------------------------------------------------------------


def kubelet_expand(args: list[str], env: dict[str, str]) -> list[str]:
    """`$(VAR)` references in container args, expanded as the kubelet does."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), a) for a in args]


def test_statefulset_shards_by_pod_ordinal(tmp_path: Path, provider_secrets: None) -> None:
    docs = render(SCENARIOS["statefulset"])
    assert "Deployment" not in kinds(docs)
    statefulset, service = get(docs, "StatefulSet"), get(docs, "Service")
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    exporter = container(docs)
    (shard_env,) = [e for e in exporter["env"] if e["name"] == "SHARD_INDEX"]
    assert shard_env["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    for ordinal in range(3):
        args = kubelet_expand(exporter["args"], {"SHARD_INDEX": str(ordinal)})
        settings = exporter_settings(args, config_file(docs), tmp_path)
        assert (settings.shard.index, settings.shard.count) == (ordinal, 3)


def test_statefulset_shard_count_follows_replicas() -> None:
    assert (
        "--shard.count=5" in container(render({**SCENARIOS["statefulset"], "replicas": 5}))["args"]
    )
    assert not [a for a in container(render({}))["args"] if a.startswith("--shard")]


# --- alert rules and dashboard ---------------------------------------------------------------


def test_prometheus_rule_carries_exactly_the_alert_and_rank_rules(tmp_path: Path) -> None:
    rule = get(render(SCENARIOS["rules-and-dashboard"]), "PrometheusRule")
    assert rule["metadata"]["labels"]["role"] == "alert-rules"
    assert rule["spec"]["groups"] == [
        *deploy_yaml(ALERTS)["groups"],
        *deploy_yaml(RANKS)["groups"],
        *deploy_yaml(LIFECYCLE)["groups"],
    ]
    rendered_rules = tmp_path / "rendered.rules.yaml"
    rendered_rules.write_text(yaml.safe_dump(rule["spec"]), encoding="utf-8")
    result = run_promtool("check", "rules", str(rendered_rules))
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_rule_can_leave_out_the_rank_rules_and_keep_firing_for() -> None:
    values = SCENARIOS["rules-and-dashboard"]
    alerts = deploy_yaml(ALERTS)["groups"]
    off = {"enabled": False}
    without = {**values, "prometheusRule": {"enabled": True, "ranks": off, "lifecycle": off}}
    assert get(render(without), "PrometheusRule")["spec"]["groups"] == alerts
    older = {**values, "prometheusRule": {"enabled": True, "keepFiringFor": False}}
    groups = get(render(older), "PrometheusRule")["spec"]["groups"]
    ranks = deploy_yaml(RANKS)["groups"]
    ranks += deploy_yaml(LIFECYCLE)["groups"]
    assert [g["name"] for g in groups] == [g["name"] for g in [*alerts, *ranks]]
    rules = [r for g in groups for r in g["rules"]]
    assert not [r for r in rules if "keep_firing_for" in r]
    kept = [r for g in ranks for r in g["rules"] if "keep_firing_for" in r]
    assert kept, "the rank alerts carry keep_firing_for by default"
    assert sum(1 for r in rules if "alert" in r) == sum(
        1 for g in [*alerts, *ranks] for r in g["rules"] if "alert" in r
    )


def test_dashboard_config_map_is_labelled_for_the_grafana_sidecar() -> None:
    config_map = get(render(SCENARIOS["rules-and-dashboard"]), "ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Training"}
    assert json.loads(config_map["data"]["training-jobs.json"]) == json.loads(
        DASHBOARD.read_text(encoding="utf-8")
    )


def test_dashboard_namespace_can_be_the_grafana_one() -> None:
    values = {"grafanaDashboard": {"enabled": True, "namespace": "grafana"}}
    config_map = get(render(values), "ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["namespace"] == "grafana"


def test_chart_copies_of_rules_and_dashboard_are_current() -> None:
    assert load_generator().out_of_date() == [], "run: python deploy/generate.py"


# --- sidecar mode ---------------------------------------------------------------------------


def test_sidecar_mode_renders_no_workload_of_its_own() -> None:
    docs = render(SCENARIOS["sidecar"])
    assert kinds(docs) == {"ConfigMap", "Secret", "PodMonitor", "PrometheusRule"}
    monitor = get(docs, "PodMonitor")
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "trainer"}}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "tje-metrics"
    assert monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["targetLabel"] == (
        "exporter_pod"
    )


def test_pod_monitor_needs_sidecar_mode_and_a_selector() -> None:
    with pytest.raises(helm_python.HelmRenderError, match="sidecar"):
        render({"podMonitor": {"enabled": True, "selector": {"matchLabels": {"a": "b"}}}})
    with pytest.raises(helm_python.HelmRenderError, match="selector"):
        render({"mode": "sidecar", "podMonitor": {"enabled": True}})


@pytest.fixture
def sidecar_host(tmp_path: Path) -> Path:
    """The README's example chart with this chart in charts/, as `helm dependency build`
    leaves it."""
    host = tmp_path / "sidecar-host"
    shutil.copytree(SIDECAR_EXAMPLE, host)
    shutil.copytree(CHART, host / "charts" / CHART.name)
    return host


def test_sidecar_example_adds_the_exporter_to_the_host_pod(
    sidecar_host: Path, tmp_path: Path, provider_secrets: None
) -> None:
    report = helm_python.lint(sidecar_host, strict=True, with_subcharts=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    docs = render({}, sidecar_host)
    assert [p for doc in docs for p in schema_problems(doc)] == []
    assert kinds(docs) == {"ConfigMap", "Deployment", "PodMonitor"}
    template = get(docs, "Deployment", f"{RELEASE}-sidecar-host")["spec"]["template"]
    assert "checksum/training-job-exporter" in template["metadata"]["annotations"]
    app, exporter = template["spec"]["containers"]
    assert (app["name"], exporter["name"]) == ("app", "training-job-exporter")
    assert exporter["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert {m["name"] for m in exporter["volumeMounts"]} <= set(volumes)
    # The volume names the ConfigMap the dependency created in the same release.
    config_map = get(docs, "ConfigMap")
    assert volumes["training-job-exporter-config"]["configMap"]["name"] == FULLNAME
    assert {ref["name"] for ref in secret_env(exporter).values()} == {"alaya-credentials"}
    settings = exporter_settings(exporter["args"], config_map["data"]["exporter.yaml"], tmp_path)
    assert [t.name for t in settings.alaya] == ["alaya-main"]


def test_sidecar_templates_need_sidecar_mode(sidecar_host: Path) -> None:
    with pytest.raises(helm_python.HelmRenderError, match="mode: sidecar"):
        render({"exporter": {"mode": "deployment"}}, sidecar_host)


def test_readme_shows_the_sidecar_example_unchanged() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    template = (SIDECAR_EXAMPLE / "templates" / "deployment.yaml").read_text(encoding="utf-8")
    assert f"```yaml\n{template}```" in readme
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    example_values = deploy_yaml(SIDECAR_EXAMPLE / "values.yaml")
    shown_values = [yaml_load(b) for b in blocks if b.startswith("exporter:")]
    assert shown_values == [{"exporter": example_values["exporter"]}]
    example_chart = deploy_yaml(SIDECAR_EXAMPLE / "Chart.yaml")
    shown_chart = [yaml_load(b) for b in blocks if b.startswith("dependencies:")]
    assert shown_chart == [{"dependencies": example_chart["dependencies"]}]
