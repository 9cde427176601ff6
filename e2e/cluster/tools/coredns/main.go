// CoreDNS with only the plugins the test cluster's Corefile uses: the stock binary links
// every cloud provider's SDK, which would triple the build time here.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

// Order matters: CoreDNS runs plugins in this order, not the Corefile's.
var directives = []string{
	"reload", "errors", "log", "health", "ready", "prometheus",
	"cache", "loadbalance", "kubernetes", "template",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
