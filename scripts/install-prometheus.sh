#!/bin/sh
# Installs the real Prometheus the analysis integration test (tests/prometheus_analysis.rs)
# runs against: Debian's `prometheus` package. Only the binary is needed; the test starts its
# own instance on a free loopback port with a temporary config and storage; a packaged service,
# if the init system starts one, is neither used nor needed.
set -eu
if command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ]; then
    echo "prometheus present: $(/usr/bin/prometheus --version 2>&1 | head -n1)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends prometheus
/usr/bin/prometheus --version 2>&1 | head -n1
