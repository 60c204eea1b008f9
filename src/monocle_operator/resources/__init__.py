"""Pure builders from a spec to the manifests of its children: no API calls, no kopf."""
