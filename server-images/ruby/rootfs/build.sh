#!/usr/bin/env bash
# rootfs/build.sh DIR: a Debian bookworm root filesystem (debootstrap --variant=minbase) with
# Debian's Ruby 3.1, Puma 5.6 and async-http 0.59, and this app in /app — the image for the
# local cluster, where no registry and no rubygems exist. Then:
#   e2e/cluster/image reference-app:dev DIR --entrypoint /app/bin/serve
# The base system is reused while the package list is unchanged; /app is refreshed every run.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: rootfs/build.sh DIR" >&2; exit 1; }
dir=$1
src=$(cd "$(dirname "$0")/.." && pwd)
packages="ruby ruby-rack puma ruby-async-http"

if [[ ! -f $dir/.reference-rootfs || $(cat "$dir/.reference-rootfs") != "$packages" ]]; then
  command -v debootstrap >/dev/null || { echo "rootfs: apt-get install debootstrap" >&2; exit 1; }
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || { echo "rootfs: no Debian mirror in the apt sources" >&2; exit 1; }
  rm -rf "$dir"
  debootstrap --variant=minbase --include="${packages// /,}" bookworm "$dir" "$mirror" >&2
  # No apt lists, caches, docs, man pages or locales in an image.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
    "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
  echo "$packages" > "$dir/.reference-rootfs"
fi

rm -rf "$dir/app"
mkdir -p "$dir/app"
cp -a "$src/config.ru" "$src/app" "$src/bin" "$src/config" "$dir/app/"

# Smoke check inside the new root: the libraries load and a bad setting is refused by name.
chroot "$dir" /usr/bin/ruby -e 'require "puma"; require "rack"; require "async/http"; require "/app/app/reference_app"'
if out=$(chroot "$dir" /usr/bin/env CPU_MS=-1 /app/bin/serve 2>&1); then
  echo "rootfs: bin/serve accepted CPU_MS=-1" >&2; exit 1
fi
grep -q CPU_MS <<<"$out" || { echo "rootfs: unexpected error: $out" >&2; exit 1; }
echo "rootfs: $dir ready ($(du -sh "$dir" | cut -f1)); next: e2e/cluster/image reference-app:dev $dir --entrypoint /app/bin/serve" >&2
