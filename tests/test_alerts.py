"""The Prometheus alert rules and the Grafana dashboard: valid, unit-tested, and in step with
`service/metrics.py` (every `chatsum_*` series and label they use exists there).

promtool comes from Debian's `prometheus` package: `scripts/install-test-tools.sh` installs it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from service import metrics

from .conftest import REPO

ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPO / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "chatsum.json"

#: Sample names each metric type exposes, from the name prometheus_client keeps (`_name`).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "info": ("_info",),
}
#: Labels Prometheus adds at scrape time, and the histogram's bucket bound.
TARGET_LABELS = {"job", "instance"}
NAME = re.compile(r"\b(chatsum_[a-z0-9_]+)\b(\{[^}]*\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: run scripts/install-test-tools.sh (as root; it installs Debian's prometheus package)")
    return path


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def exported() -> dict[str, tuple[str, set[str] | None]]:
    """Sample name -> (metric type, label names or None for any) of every metric in service/metrics.py."""
    out: dict[str, tuple[str, set[str] | None]] = {}
    for obj in vars(metrics).values():
        if isinstance(obj, MetricWrapperBase):
            labels: set[str] | None = None if obj._type == "info" else set(obj._labelnames)
            if obj._type == "histogram" and labels is not None:
                labels = labels | {"le"}
            for suffix in SUFFIXES[obj._type]:
                out[obj._name + suffix] = (obj._type, labels)
    return out


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"] if "alert" in rule]


def dashboard_targets() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    panels = list(board["panels"])
    for panel in board["panels"]:
        panels.extend(panel.get("panels", []))  # collapsed rows keep their panels
    return [(p["title"], t["expr"]) for p in panels for t in p.get("targets", []) if t.get("expr")]


def exprs() -> list[tuple[str, str]]:
    """(where, expr) of every alert rule and dashboard query."""
    return [(f"alert {r['alert']}", r["expr"]) for r in alert_rules()] + [(f"panel {t}", e) for t, e in dashboard_targets()]


# ---- promtool ----------------------------------------------------------------------------------

def test_alert_rules_are_valid():
    result = run_promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rule_unit_tests_pass():
    result = run_promtool("test", "rules", str(ALERTS_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_dashboard_queries_are_valid_promql(tmp_path: Path):
    """Each dashboard query, with Grafana's variables filled in, as a recording rule for promtool."""
    def concrete(expr: str) -> str:
        return expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$job", ".*").replace("$instance", ".*")

    rules = [{"record": f"dashboard:query{i}", "expr": concrete(expr)} for i, (_, expr) in enumerate(dashboard_targets())]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run_promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


# ---- the files themselves ----------------------------------------------------------------------

def test_every_alert_has_severity_summary_description_and_runbook():
    rules = alert_rules()
    assert {r["alert"] for r in rules} >= {
        "ChatsumSLARateLow", "ChatsumConsumerLagGrowing", "ChatsumFallbackRateHigh", "ChatsumKVCacheHigh",
        "ChatsumDLQSpike", "ChatsumWorkerDown", "ChatsumWorkerNotReady",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        for key in ("summary", "description", "runbook"):
            assert rule["annotations"].get(key), f"{rule['alert']}: no {key} annotation"


def test_every_alert_is_unit_tested_firing_and_not_firing():
    cases = [case for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"] for case in test.get("alert_rule_test", [])]
    for rule in alert_rules():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c.get("exp_alerts") for c in mine), f"{rule['alert']}: no test where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{rule['alert']}: no test where it stays quiet"


def test_dashboard_shape():
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] == "chatsum" and 36 <= board["schemaVersion"] <= 41
    assert "DS_PROMETHEUS" not in DASHBOARD.read_text()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "prometheus"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "prometheus", panel["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    used = " ".join(e for _, e in dashboard_targets())
    for name in ("chatsum_events_total", "chatsum_summaries_total", "chatsum_summaries_within_sla_total",
                 "chatsum_trigger_to_publish_seconds_bucket", "chatsum_fallbacks_total", "chatsum_confidence_logprob_bucket",
                 "chatsum_pii_masked_total", "chatsum_consumer_lag", "chatsum_llm_inflight", "chatsum_llm_queue_depth",
                 "chatsum_llm_tokens_total", "chatsum_vllm_kv_cache_usage_ratio", "chatsum_vllm_requests_waiting",
                 "chatsum_vllm_requests_running", "chatsum_retrieval_seconds_bucket", "chatsum_dlq_total",
                 "chatsum_sessions_open", "chatsum_build_info"):
        assert name in used, f"the dashboard has no panel for {name}"
    assert "vector(0.995)" in used  # the SLA target line


# ---- no drift from service/metrics.py ----------------------------------------------------------

def test_every_metric_and_label_used_exists_in_service_metrics():
    known = exported()
    seen: set[str] = set()
    problems = []
    for where, expr in exprs():
        for match in NAME.finditer(expr):
            name, selector = match.group(1), match.group(2) or ""
            seen.add(name)
            if name not in known:
                problems.append(f"{where}: {name} is not exported by service/metrics.py")
                continue
            kind, labels = known[name]
            for label in MATCHER.findall(selector):
                if labels is not None and label not in labels | TARGET_LABELS:
                    problems.append(f"{where}: {name} has no label {label!r} ({kind} with labels {sorted(labels)})")
    assert not problems, "\n".join(problems)
    assert len(seen) >= 15  # the parser found the names at all


def test_the_drift_check_catches_a_wrong_name():
    known = exported()
    wrong = [m.group(1) for m in NAME.finditer('rate(chatsum_summary_total[5m]) + chatsum_llm_seconds_total') if m.group(1) not in known]
    assert wrong == ["chatsum_summary_total", "chatsum_llm_seconds_total"]
    assert "chatsum_build_info" in known and "chatsum_trigger_to_publish_seconds_bucket" in known and "chatsum_events_total" in known
