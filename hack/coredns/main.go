// CoreDNS with only the plugins the test kit's Corefile uses (operator_testkit/nodes/dns.py), as
// upstream's plugin.cfg is meant to be trimmed: the whole set (cloud DNS providers, tracing) took
// most of a cold build's five minutes.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
