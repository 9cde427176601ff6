#!/usr/bin/env bash
# rootfs/build-postgres.sh DIR: a Debian bookworm root filesystem (debootstrap
# --variant=minbase) with Debian's PostgreSQL 15 and rootfs/postgres-start as its entry point
# (the cluster is created at the first start; see that script for its variables) — the
# Rails app's database in the local cluster. Then:
#   e2e/cluster/image postgres:dev DIR --entrypoint /usr/local/bin/postgres-start
# The base system is reused while the package list is unchanged; the script is refreshed.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: rootfs/build-postgres.sh DIR" >&2; exit 1; }
dir=$1
src=$(cd "$(dirname "$0")" && pwd)
packages="postgresql-15"

if [[ ! -f $dir/.postgres-rootfs || $(cat "$dir/.postgres-rootfs") != "$packages" ]]; then
  command -v debootstrap >/dev/null || { echo "rootfs: apt-get install debootstrap" >&2; exit 1; }
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || { echo "rootfs: no Debian mirror in the apt sources" >&2; exit 1; }
  rm -rf "$dir"
  debootstrap --variant=minbase --include="${packages// /,}" bookworm "$dir" "$mirror" >&2
  # The package's own cluster (pg_createcluster in its postinst): the entry point makes its own.
  rm -rf "$dir"/etc/postgresql/15 "$dir"/var/lib/postgresql/15
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
    "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
  echo "$packages" > "$dir/.postgres-rootfs"
fi

# No JIT (postgres-start turns it off): LLVM, the bitcode and z3 are 155 of the image's 370 MB.
rm -rf "$dir"/usr/lib/x86_64-linux-gnu/libLLVM-*.so* "$dir"/usr/lib/x86_64-linux-gnu/libz3.so* \
  "$dir"/usr/lib/postgresql/15/lib/llvmjit*.so "$dir"/usr/lib/postgresql/15/lib/bitcode
install -m 0755 "$src/postgres-start" "$dir/usr/local/bin/postgres-start"

# Smoke check inside the new root: a cluster is created (initdb, the user, the database) as
# the entry point does at a pod's first start, then removed.
rm -rf "$dir/tmp/smoke-pgdata"
chroot "$dir" /usr/bin/env PGDATA=/tmp/smoke-pgdata POSTGRES_PASSWORD=smoke POSTGRES_INIT_ONLY=1 \
  /usr/local/bin/postgres-start 2>&1 | tail -1 >&2
[[ -s $dir/tmp/smoke-pgdata/PG_VERSION ]] || { echo "rootfs: postgres-start made no cluster" >&2; exit 1; }
rm -rf "$dir/tmp/smoke-pgdata"
echo "rootfs: $dir ready ($(du -sh "$dir" | cut -f1)); next: e2e/cluster/image postgres:dev $dir --entrypoint /usr/local/bin/postgres-start" >&2
