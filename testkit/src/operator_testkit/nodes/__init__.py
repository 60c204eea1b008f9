"""Real nodes for the tests, the sandbox and the benches: a real kubelet, containerd and runc per node.

- :mod:`.plan`     where a slot's nodes live: addresses, names, files (pure)
- :mod:`.configs`  containerd's, the CNI network's, the kubelet's and kube-proxy's configuration (pure)
- :mod:`.dns`      CoreDNS's manifests (pure)
- :mod:`.tools`    the node programs, built from Go modules pinned under ``hack/``
- :mod:`.images`   the images nodes run, built with buildah and loaded into containerd
- :mod:`.host`     what nodes take from the machine (a slot, a network namespace, cgroups, settings) and
                   how it is given back
- :mod:`.daemons`  how the nodes' daemons are started, and the record that starts one again
- :mod:`.cluster`  :class:`~.cluster.LocalCluster`: a control plane and its real nodes, started and stopped
- :mod:`.faults`   faults of pods, containers and volumes (kill, freeze, partition, fill ...)
- :mod:`.power`    faults of a whole node: power cut, reboot, isolation from the API server, drain
- :mod:`.fixtures` the ``real_cluster`` pytest fixture
"""
