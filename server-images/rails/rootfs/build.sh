#!/usr/bin/env bash
# rootfs/build.sh DIR: a Debian bookworm root filesystem (debootstrap --variant=minbase) with
# Debian's Ruby 3.1, Rails 6.1, Puma 5.6, the pg driver and async-http (the delay server), and
# this app in /app (with the concurrency-metrics gem in /app/vendor when the repository has
# it) — the Rails image for the local cluster, where no registry and no rubygems exist. Then:
#   e2e/cluster/image rails-app:dev DIR --entrypoint /app/bin/serve
# The base system is reused while the package list is unchanged; /app is refreshed every run.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: rootfs/build.sh DIR" >&2; exit 1; }
dir=$1
src=$(cd "$(dirname "$0")/.." && pwd)
packages="ruby ruby-rails puma ruby-pg ruby-async-http"

if [[ ! -f $dir/.rails-rootfs || $(cat "$dir/.rails-rootfs") != "$packages" ]]; then
  command -v debootstrap >/dev/null || { echo "rootfs: apt-get install debootstrap" >&2; exit 1; }
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || { echo "rootfs: no Debian mirror in the apt sources" >&2; exit 1; }
  rm -rf "$dir"
  debootstrap --variant=minbase --include="${packages// /,}" bookworm "$dir" "$mirror" >&2
  # No apt lists, caches, docs, man pages or locales in an image.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
    "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
  echo "$packages" > "$dir/.rails-rootfs"
fi

rm -rf "$dir/app"
mkdir -p "$dir/app"
# -L: bin/delay-server is the reference app's, linked.
cp -aL "$src/config.ru" "$src/Rakefile" "$src/app" "$src/bin" "$src/config" "$src/db" "$src/lib" "$dir/app/"
gem=$src/../../concurrency-metrics
if [[ -d $gem/lib ]]; then
  mkdir -p "$dir/app/vendor"
  cp -a "$gem" "$dir/app/vendor/concurrency-metrics"
fi

# Smoke check inside the new root: the app boots (eager loading every class, no database
# needed for that) and a bad setting is refused by name.
chroot "$dir" /usr/bin/ruby -e 'require "/app/config/environment"; abort "no models" unless Product.table_name == "products"'
if out=$(chroot "$dir" /usr/bin/env RAILS_MAX_THREADS=0 /app/bin/serve 2>&1); then
  echo "rootfs: bin/serve accepted RAILS_MAX_THREADS=0" >&2; exit 1
fi
grep -q RAILS_MAX_THREADS <<<"$out" || { echo "rootfs: unexpected error: $out" >&2; exit 1; }
if [[ -d $dir/app/vendor/concurrency-metrics ]]; then
  chroot "$dir" /usr/bin/env CONCURRENCY_METRICS=1 /usr/bin/ruby -e 'require "/app/config/environment"
    abort "the gem is not in the middleware stack" unless Rails.application.middleware.include?(ConcurrencyMetrics::Middleware)'
fi
echo "rootfs: $dir ready ($(du -sh "$dir" | cut -f1)); next: e2e/cluster/image rails-app:dev $dir --entrypoint /app/bin/serve" >&2
