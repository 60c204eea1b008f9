"""Builders for DocSearch scraper CronJobs, one per entry of ``spec.scrapers``.

The docsearch-scraper image reads its target from TYPESENSE_HOST, _PORT,
_PROTOCOL and _API_KEY, and its configuration (JSON) from CONFIG. With TLS on the nodes, it speaks
HTTPS to the client Service and verifies it with the nodes' CA (its Typesense client is Python's
requests, which reads REQUESTS_CA_BUNDLE).
"""

from __future__ import annotations

import json
from typing import Any

from typesense_operator.api.v1alpha1 import DocSearchScraperSpec
from typesense_operator.resources.model import API_KEY_DATA_KEY, Cluster, Manifest
from typesense_operator.resources.tls import NodesTls, trust_nodes

__all__ = ["SCRAPER", "build_scraper_cronjobs", "invalid_scraper_configs", "scraper_config"]

SCRAPER = "docsearch-scraper"


def scraper_config(scraper: DocSearchScraperSpec) -> str:
    """The scraper's JSON configuration: its own, or one for a Docusaurus site at its host (the layout
    the Go operator generates, so that a site it scraped is scraped the same way)."""
    if scraper.config is not None:
        return scraper.config
    site = f"{scraper.protocol}://{scraper.host}"
    generated = {
        "index_name": scraper.name,
        "start_urls": [site],
        "sitemap_urls": [f"{site}/sitemap.xml"],
        "sitemap_alternate_links": False,
        "stop_urls": ["/tests"],
        "selectors": {
            "lvl0": {
                "selector": "nav.menu a.menu__link--active, .navbar__item.navbar__link--active",
                "default_value": "Documentation",
            },
            "lvl1": "article h1, header h1",
            "lvl2": "article h2",
            "lvl3": "article h3",
            "lvl4": "article h4",
            "lvl5": "article h5",
            "lvl6": "article h6",
            "text": "article p, article li, article td",
        },
        "strip_chars": " .,;:#",
        "custom_settings": {
            "separatorsToIndex": "_",
            "attributesForFaceting": ["language", "version", "type", "docusaurus_tag"],
            "attributesToRetrieve": ["hierarchy", "content", "anchor", "url", "url_without_anchor", "type"],
        },
    }
    return json.dumps(generated)


def invalid_scraper_configs(cluster: Cluster) -> dict[str, str]:
    """Scraper name to the JSON error of its config, for each scraper whose config is not a JSON object."""
    errors: dict[str, str] = {}
    for scraper in cluster.spec.scrapers or []:
        if scraper.config is None and scraper.host is None:
            errors[scraper.name] = (
                "a scraper needs config (its JSON configuration) or host (the site to scrape)"
            )
            continue
        try:
            parsed = json.loads(scraper_config(scraper))
        except json.JSONDecodeError as error:
            errors[scraper.name] = (
                f"config is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
            )
            continue
        if not isinstance(parsed, dict):
            errors[scraper.name] = "config must be a JSON object"
    return errors


def _cronjob(cluster: Cluster, scraper: DocSearchScraperSpec, tls: NodesTls | None) -> Manifest:
    env = [
        {"name": "TYPESENSE_HOST", "value": f"{cluster.client_service_name}.{cluster.namespace}.svc"},
        {"name": "TYPESENSE_PORT", "value": str(cluster.spec.api_port)},
        {"name": "TYPESENSE_PROTOCOL", "value": "https" if tls is not None else "http"},
        {
            "name": "TYPESENSE_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": cluster.admin_key_secret_name, "key": API_KEY_DATA_KEY}},
        },
        {"name": "CONFIG", "value": scraper_config(scraper)},
    ]
    container: dict[str, Any] = {"name": "scraper", "image": scraper.image, "env": env}
    if scraper.auth_configuration is not None:
        container["envFrom"] = [{"secretRef": {"name": scraper.auth_configuration.name}}]
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if tls is not None:
        trust_nodes(cluster, tls, pod_spec, container, ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"))
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": cluster.metadata(cluster.scraper_name(scraper.name), SCRAPER),
        "spec": {
            "schedule": scraper.schedule,
            # Two scrapes of one site at once would write the same collection twice.
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 1,
                    "template": {
                        "metadata": {"labels": cluster.labels(SCRAPER)},
                        "spec": cluster.pulling(pod_spec),
                    },
                }
            },
        },
    }


def build_scraper_cronjobs(cluster: Cluster, tls: NodesTls | None = None) -> list[Manifest]:
    """One CronJob per scraper whose config is valid; an invalid one is reported, not deployed."""
    invalid = invalid_scraper_configs(cluster)
    return [_cronjob(cluster, s, tls) for s in cluster.spec.scrapers or [] if s.name not in invalid]
