"""Network conventions shared by the clients and servers: which hosts count as this machine."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ``::1``): traffic that never leaves
    the machine. Any other name may resolve anywhere, so it counts as reachable from other machines."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
