"""The real nodes' CoreDNS is built with only the plugins its Corefile names (issue 67: the whole set
took most of a cold build's five minutes): the two must agree, or CoreDNS refuses its Corefile."""

from __future__ import annotations

import re
from pathlib import Path

from operator_testkit.nodes.dns import COREFILE

MAIN = Path(__file__).parents[2] / "hack" / "coredns" / "main.go"


def test_coredns_is_built_with_exactly_the_plugins_its_corefile_names() -> None:
    # A plugin's directive is the first word of a line one level inside the server block.
    named = {line.split()[0] for line in COREFILE.splitlines() if re.match(r"^ {4}\w", line)}
    built = set(re.findall(r'"github\.com/coredns/coredns/plugin/(\w+)"', MAIN.read_text()))
    assert named == built
