"""Quorum health and recovery of a Typesense raft cluster, the map.

Here: ``model`` (pure data: what a probe found, a plan, the quorum's record), ``decide`` (pure: what
to do about the quorum), ``roll`` (pure: the order of a roll, the leader last), ``record`` (pure: the
record and the roll in and out of status), ``hosts`` and ``node_loss`` (pure: the members' Kubernetes
nodes, and whether to replace a member lost with its node), ``probe`` (the HTTP adapter that asks
every node). The cluster controller's steps that act on them are in
:mod:`typesense_operator.controller.cluster` (``quorum``, ``roll``, ``node_loss``, ``nodes``).
"""
