"""The Cluster Stack operator's controller room: thin kopf handlers that read, diff, apply and report."""
