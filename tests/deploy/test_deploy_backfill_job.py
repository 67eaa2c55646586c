"""The chart's one-off backfill Job: off by default; when on, the real backfill command line
(read by the command's own parser) against the release's configuration and credentials, with
the store's secrets mounted as the files its flags name. Lint and the Kubernetes schemas run on
it as on every manifest (the `backfill-job` scenario of test_deploy_chart.py)."""

from __future__ import annotations

from typing import Any

import pytest
from test_deploy_chart import FULLNAME, SCENARIOS, render

from exporter.backfill.cli import parser

VALUES = SCENARIOS["backfill-job"]


def job(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "Job"]
    return found


def test_off_by_default() -> None:
    assert not [d for d in render({}) if d["kind"] == "Job"]


def test_runs_the_backfill_against_the_releases_configuration() -> None:
    docs = render(VALUES)
    spec = job(docs)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"][0] == "backfill"
    args = parser().parse_args(container["args"][1:])
    assert args.remote_write == "https://mimir.example/api/v1/push"
    assert args.rw_window == "30d" and args.rw_headers == ["X-Scope-OrgID=team-a"]
    assert args.rw_username == "backfill"
    assert args.rw_password_file == "/etc/training-job-exporter/remote-write/password"
    assert args.rw_ca_file == "/etc/training-job-exporter/remote-write/ca.crt"
    assert args.rw_token_file is None and args.since == "7d"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts["/etc/training-job-exporter"]]["configMap"]["name"] == FULLNAME
    assert args.config == "/etc/training-job-exporter/exporter.yaml"
    secret = volumes[mounts["/etc/training-job-exporter/remote-write"]]["secret"]
    assert secret["secretName"] == "remote-write-creds"
    # The resume state beside the output, on the claim: a retried pod sends nothing twice.
    work = volumes[mounts["/var/lib/training-job-exporter-backfill"]]
    assert args.output == "/var/lib/training-job-exporter-backfill/rest.om"
    assert work["persistentVolumeClaim"]["claimName"] == "backfill-state"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]}
    assert env["TJE_AIHC_SECRET_ACCESS_KEY"] == FULLNAME
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["restartPolicy"] == "OnFailure"


def test_a_changed_value_makes_a_new_job_and_an_unchanged_one_the_same() -> None:
    name = job(render(VALUES))["metadata"]["name"]
    assert name.startswith(f"{FULLNAME}-backfill-")
    assert job(render(VALUES))["metadata"]["name"] == name
    changed = {**VALUES, "backfill": {**VALUES["backfill"], "since": "3d"}}
    assert job(render(changed))["metadata"]["name"] != name


@pytest.mark.parametrize(
    "backfill, says",
    [
        ({"enabled": True}, "backfill.remoteWrite.url: required"),
        (
            {
                "enabled": True,
                "remoteWrite": {"url": "http://p:9090/api/v1/write", "passwordKey": "p"},
            },
            "name the Secret holding them",
        ),
    ],
)
def test_refuses_a_job_that_could_not_run(backfill: dict[str, Any], says: str) -> None:
    with pytest.raises(Exception, match=says):
        render({"backfill": backfill})
