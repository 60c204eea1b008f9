// Pinned source of the Prometheus Operator's CRDs (example/prometheus-operator-crd/): the charts'
// ServiceMonitor and PrometheusRule, and the Typesense operator's PodMonitor, are validated against
// them. Nothing is built from it: the test kit runs `go mod download -json
// github.com/prometheus-operator/prometheus-operator` here, which fetches the module through the
// module proxy, checks it against go.sum, and names its directory in the module cache. Nothing
// imports the module, so do not run `go mod tidy` here (it would drop the require line).
module operator-suite.local/hack/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
