"""A node agent: a Python stand-in for the kubelet, so pods on the local control plane really run.

The local control plane has no kubelet, so without this every pod stays Pending.
:class:`~.agent.NodeAgent` registers a few Node objects (one per zone), and for
every pod the real kube-scheduler binds to them it gives the pod a fresh
loopback address, prepares its volumes, env and hosts file, starts its
containers as local processes through the runner registry (:mod:`.runners`),
probes them and writes the pod's status back, as the kubelet would. It also
serves ``kubectl logs`` on each node's kubelet endpoint, makes ClusterIP
Services reachable, and takes faults on demand from tests (:mod:`.faults`).

Layout (pure decisions first, adapters after):

- :mod:`.addresses`  pod IP allocation in a loopback range (pure)
- :mod:`.env`        container env from literals, Secrets, ConfigMaps and the downward API (pure)
- :mod:`.volumes`    the mount table and path translation (pure), volume files on disk
- :mod:`.hosts`      per-pod hosts files built from Services and EndpointSlices (pure + one writer)
- :mod:`.runners`    image pattern -> runner: real typesense-server, real nginx, or a labelled stand-in
- :mod:`.nginxconf`  an nginx configuration rewritten to bind the pod's address and use its paths (pure)
- :mod:`.standin`    the stand-in program itself (stdlib only, run as a script)
- :mod:`.probes`     probe thresholds (pure) and probe execution (httpGet, tcpSocket, exec)
- :mod:`.status`     pod status from container states (pure)
- :mod:`.failures`   why a container cannot start: waiting reason and message; stuck pods (pure)
- :mod:`.processes`  starting and stopping container processes, each in its own mount namespace
- :mod:`.pods`       one worker per pod: volumes, containers, probes, restarts, deletion
- :mod:`.nodes`      Node registration, status heartbeats and Leases
- :mod:`.storage`    a provisioner: a hostPath PV for every Pending PVC
- :mod:`.disks`      size-limited (tmpfs) volumes, wiping and filling them
- :mod:`.serviceproxy` ClusterIP:port -> ready pod IP:targetPort, a small TCP proxy
- :mod:`.kubelet`    the nodes' HTTPS kubelet endpoint: ``/containerLogs`` for ``kubectl logs``
- :mod:`.control`    the agent's control API on loopback: faults on demand
- :mod:`.agent`      the agent that ties them together; ``python -m`` runs it
- :mod:`.faults`     the tests' client of the control API
- :mod:`.cli`        ``operator-suite-dev agent ...``: the same faults from a shell
- :mod:`.harness`    start and stop an agent as a subprocess
- :mod:`.fixtures`   the ``node_agent`` pytest fixture (the agent as a subprocess)

Test and demo infrastructure only: nothing here is used by the operators.
Every address it hands out or sends traffic to is a loopback address.
"""

from __future__ import annotations

__all__: list[str] = []
