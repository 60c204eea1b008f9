"""Pod IP allocation: a fresh loopback address per pod, as a CNI plugin gives a fresh IP per sandbox.

Addresses come from a dedicated loopback range (127.50.0.0/16 by default) and
are handed out round-robin from after the last one given, so a re-created
pod gets a *new* address (as on a real cluster) and an address is never
reused while a pod holds it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection

__all__ = ["DEFAULT_POD_CIDR", "next_address"]

DEFAULT_POD_CIDR = "127.50.0.0/16"


def next_address(
    network: ipaddress.IPv4Network,
    in_use: Collection[ipaddress.IPv4Address],
    last: ipaddress.IPv4Address | None,
) -> ipaddress.IPv4Address:
    """The first free host address of ``network`` after ``last`` (wrapping round).

    Addresses ending in .0 or .255 are skipped: they are valid on loopback, but
    read like network or broadcast addresses in logs and confuse people.
    Raises ``ValueError`` if the network is outside 127.0.0.0/8 or full.
    """
    if not network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
        raise ValueError(f"pod network {network} is not a loopback range")
    first = int(network.network_address) + 1
    last_host = int(network.broadcast_address) - 1
    size = last_host - first + 1
    if size <= 0:
        raise ValueError(f"pod network {network} has no host addresses")
    start = int(last) + 1 if last is not None and first <= int(last) <= last_host else first
    taken = {int(a) for a in in_use}
    for step in range(size):
        candidate = first + (start - first + step) % size
        if candidate in taken or candidate & 0xFF in (0, 255):
            continue
        return ipaddress.IPv4Address(candidate)
    raise ValueError(f"pod network {network} is full")
