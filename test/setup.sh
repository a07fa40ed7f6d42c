#!/usr/bin/env bash
# The suite's set-up on a Debian machine, run by `npm test` (test/run.sh) before anything else:
# checks Node.js, installs the Debian packages the tests drive (as root; otherwise it names what
# is missing and how to get it), and fetches the git history when the clone is shallow.
# test/README.md says why each is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    console.error(`Node.js ${process.version} is too old: Slipway needs 20.19 or newer (24 LTS works too); README.md, "Set up", says how to get it`);
    process.exit(2);
  }'

# Real clients and firmware for the boot tests: curl and tftp-hpa (TFTP/HTTP), busybox udhcpc,
# dhclient, kea-admin (perfdhcp), isc-dhcp-relay (dhcrelay), radvd (the IPv6 RA iPXE waits for),
# QEMU with SeaBIOS + ipxe-qemu and OVMF; ipxe holds the boot binaries served by default;
# iproute2 and procps for the network-namespace lab; haproxy, the balancer in front of the gRPC
# API (lb/), whose configuration the tests check with `haproxy -c` and run against real nodes;
# iputils-arping, the gratuitous ARP that lb/vip-manager.ts sends when the VIP moves.
# The boot OS (`slipway bootos build`, src/bootos/) is made from linux-image-amd64,
# busybox-static (which also gives the tests udhcpc; it replaces Debian's dynamic busybox),
# zstd, binutils (strip) and kexec-tools; cpio reads its archive back in a test. The built-in
# actions write real filesystems on loop devices (util-linux, e2fsprogs, dosfstools); power
# control drives OpenIPMI's BMC simulator (openipmi) with ipmitool. The end-to-end test installs
# a bootable disk image it builds with sfdisk (fdisk), mtools and syslinux (BIOS and EFI).
# qemuimg2disk converts a qcow2 image read over HTTP with qemu-img (qemu-utils) through its curl
# driver (qemu-block-extra); the boot OS carries both when they are installed. grub2disk's test
# installs Debian's GRUB (grub-pc-bin, grub2-common) from an installed system it makes.
# The package test installs the .deb (`npm run package`) into a Debian 13 root made by
# debootstrap; git fetches the history the rolling upgrade test builds the previous release from.
# xz-utils and bzip2 make the xz and bzip2 images image2disk's test reads.
# iptables keeps UEFI HTTP boot from being offered to the OVMF test's VM (its string match).
# The benchmarks' quick forms (bench/quick.ts) run the systems they compare with: etcd 3.4
# (etcd-server, etcd-client), Kea (kea-dhcp4-server), tftpd-hpa and atftp.
packages=(
  curl tftp-hpa ipxe iproute2 procps busybox-static isc-dhcp-client kea-admin isc-dhcp-relay radvd
  qemu-system-x86 ipxe-qemu ovmf haproxy iputils-arping linux-image-amd64 zstd binutils kexec-tools
  cpio util-linux e2fsprogs dosfstools openipmi ipmitool fdisk mtools syslinux syslinux-common
  syslinux-efi debootstrap git iptables etcd-server etcd-client kea-dhcp4-server tftpd-hpa atftp
  groff-base qemu-utils qemu-block-extra grub-pc-bin grub2-common xz-utils bzip2
)

if ! command -v dpkg-query >/dev/null; then
  echo "the test suite runs on Debian (12 or 13): it installs and drives Debian's packages" >&2
  exit 2
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "the test suite needs root (network namespaces, loop devices, QEMU, ports 67 and 69) and" >&2
    echo "these Debian packages: ${missing[*]}" >&2
    echo "run it as root (sudo npm test), which installs them, or: sudo apt-get install ${missing[*]}" >&2
    exit 2
  fi
  echo "== installing Debian packages the tests use ($(date +%T)): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$(id -u)" != 0 ]; then
  echo "the test suite needs root: network namespaces, loop devices, QEMU and ports 67 and 69 (sudo npm test)" >&2
  exit 2
fi

# The rolling upgrade test builds the previous release from this repository's history
# (test/support/previous-release.ts): a shallow clone must fetch it first.
if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
  echo "== fetching the git history ($(date +%T))"
  git fetch --quiet --unshallow || echo "could not fetch the history: the rolling upgrade test will say so" >&2
fi
