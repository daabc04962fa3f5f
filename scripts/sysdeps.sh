#!/usr/bin/env bash
# Debian packages the tests and benchmarks use: Redis (distributed crawl, shared rate limits),
# PostgreSQL (shared feedback store), HAProxy (replicas behind a load balancer: serve/cluster),
# Chromium (web page test), wrk (load test). Installs only what is missing;
# needs root (or sudo) to install.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null || need+=(postgresql)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
command -v wrk >/dev/null || need+=(wrk)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
fc-list 2>/dev/null | grep -qi 'cjk\|wqy\|noto' || need+=(fonts-noto-cjk)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${need[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
