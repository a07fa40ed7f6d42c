#!/usr/bin/env bash
# `npm run package [-- OUT_DIR]`: builds slipway_VERSION_amd64.deb (default OUT_DIR: dist-package/)
# from this checkout: the compiled build, proto/, the production dependencies from the lockfile,
# the systemd units, a default /etc/slipway/server.yaml and the service user.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist-package}")
version=$(node -p "require('./package.json').version")
# Debian's own Node.js: 20.19 in Debian 13; the package's engines field says the same.
node_min=$(node -p "require('./package.json').engines.node.replace(/^>=\s*/, '')")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The compiled build, unless dist/ is already newer than every source (as bin/slipway.js judges).
if [ -f dist/.built ] && [ -z "$(find src lb -newer dist/.built -print -quit)" ]; then
  echo "== compiled build in dist/ is current"
else
  echo "== compiling"
  npm run build --silent
fi
lib=$stage/usr/lib/slipway
mkdir -p "$lib/bin"
cp -r dist proto package.json package-lock.json "$lib/"
# The test suite's dist/ holds the tests and benchmarks too (test/build-dist.ts): not shipped.
rm -rf "$lib/dist/test" "$lib/dist/bench" "$lib/dist/.built"
touch "$lib/dist/.built"
cp bin/slipway.js "$lib/bin/"

echo "== production dependencies"
# The lockfile's versions; install scripts as package.json's allowScripts permits them
# (classic-level's native addon, esbuild's binary check).
(cd "$lib" && npm ci --omit=dev --no-audit --no-fund --loglevel=error >/dev/null)
rm -f "$lib/package-lock.json"

install -d "$stage/usr/bin"
ln -s ../lib/slipway/bin/slipway.js "$stage/usr/bin/slipway"
install -D -m 0644 packaging/slipway.service "$stage/usr/lib/systemd/system/slipway.service"
install -D -m 0644 packaging/slipway-balancer-follow.service \
  "$stage/usr/lib/systemd/system/slipway-balancer-follow.service"
install -D -m 0644 packaging/server.yaml "$stage/etc/slipway/server.yaml"
install -D -m 0644 packaging/balancer-follow.default "$stage/etc/default/slipway-balancer-follow"
doc=$stage/usr/share/doc/slipway
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 docs/operations.md "$doc/operations.md"
install -D -m 0644 examples/server.yaml "$doc/examples/server.yaml"
# The man page, made from every command's help by the build being packaged (`man slipway`).
install -d "$stage/usr/share/man/man1"
node "$lib/bin/slipway.js" __manual --format man | gzip -9n >"$stage/usr/share/man/man1/slipway.1.gz"

install -d "$stage/DEBIAN"
install -m 0755 packaging/postinst packaging/postrm "$stage/DEBIAN/"
printf '%s\n' /etc/slipway/server.yaml /etc/default/slipway-balancer-follow >"$stage/DEBIAN/conffiles"
installed_kb=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: slipway
Version: $version
Architecture: amd64
Maintainer: Slipway developers <slipway@localhost>
Installed-Size: $installed_kb
Depends: nodejs (>= $node_min), adduser, iproute2, iputils-arping, ipxe
Recommends: haproxy, ipmitool
Suggests: linux-image-amd64, busybox-static, zstd, binutils, kexec-tools, qemu-utils, qemu-block-extra, qemu-system-x86, ovmf, openipmi
Section: admin
Priority: optional
Description: highly available bare-metal provisioner
 Several provisioner nodes replicate all state through Raft and each serves DHCP, TFTP
 and HTTP boot, the CLI API and the worker streams, so machines keep provisioning when a
 node dies. This package runs a node as the slipway.service systemd unit, as the slipway
 user with only the network capabilities it needs.
CONTROL

mkdir -p "$out"
deb="$out/slipway_${version}_amd64.deb"
# zstd, which dpkg reads since 1.21.18 (Debian 12 and later): level 9 compresses the package in
# under a second, 14 MB, where xz took 23 CPU seconds for 12 MB.
dpkg-deb --root-owner-group -Zzstd -z9 --build "$stage" "$deb" >/dev/null
echo "$deb"
