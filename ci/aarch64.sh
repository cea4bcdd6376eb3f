#!/usr/bin/env bash
# The aarch64 tier on an x86-64 machine (nox -s aarch64 calls this there; issue 40): an arm64
# Debian 12 rootfs made by mmdebstrap (about 4 minutes, kept in .work/aarch64/root), this
# checkout copied into it, and `nox -s aarch64` run inside it by chroot under qemu-user, where
# the session finds itself on aarch64 and runs the tier natively. Needs root, mmdebstrap and
# qemu-user-static (binfmt registered; this registers it when it can). Arguments go to pytest.
# The nox environment, pip's cache and the test wheels stay in the rootfs between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${AARCH64_ROOT:-$PWD/.work/aarch64/root}
say() { echo "ci/aarch64.sh: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (mmdebstrap, mounts, chroot)"; exit 3; }
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || true
  command -v update-binfmts >/dev/null && update-binfmts --enable qemu-aarch64 || true
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  say "no qemu-aarch64 binfmt handler: apt install qemu-user-static binfmt-support"
  exit 3
fi
command -v mmdebstrap >/dev/null || { say "mmdebstrap missing: apt install mmdebstrap"; exit 3; }

mounted() { grep -qs " $(realpath -m "$root")/$1 " /proc/mounts; }
release() {
  for m in dev/shm dev/pts dev sys proc; do
    if mounted "$m"; then umount -l "$root/$m" || true; fi
  done
}
trap release EXIT

packages=python3,python3-venv,git,ca-certificates,g++,cmake,make
stamp=$root/.cuda-gate-rootfs
if [ "$(cat "$stamp" 2>/dev/null)" != "$packages" ]; then
  release
  for m in proc sys dev; do
    if mounted "$m"; then say "$root/$m is still mounted: not removing $root"; exit 3; fi
  done
  rm -rf "$root" && mkdir -p "$(dirname "$root")"
  say "making the arm64 Debian 12 rootfs in $root (about 4 minutes)"
  mmdebstrap --quiet --arch=arm64 --variant=minbase --include="$packages" bookworm "$root"
  echo "$packages" > "$stamp"
fi
# This machine's name servers, certificate authorities (a proxy's included) and pip settings.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$root/etc/pip.conf"; fi

# The checkout as git sees it (tracked files and new ones not ignored), fresh each run.
rm -rf "$root/src" && mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$root/src"

mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# Only the settings the installs need cross into the chroot (no tokens, no cloud keys).
pass=()
while IFS='=' read -r name _; do
  case $name in
    PIP_*|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|http_proxy|https_proxy|no_proxy|CI) pass+=("$name=${!name}") ;;
  esac
done < <(env)
say "running nox -s aarch64 in the chroot (qemu-user: expect 5-20x slower than native)"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  GATE_TEST_WHEELS=/var/cache/cuda-gate-wheels "${pass[@]}" /bin/sh -c '
    cd /src &&
    { [ -x /opt/nox/bin/nox ] || { python3 -m venv /opt/nox && /opt/nox/bin/pip install -q nox; }; } &&
    exec /opt/nox/bin/nox --envdir /var/cache/cuda-gate-nox -s aarch64 -- "$@"' sh "$@"
