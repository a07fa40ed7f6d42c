// Goal: decideBoot gives each kind of network-booting client the right boot file, and never
// sends an iPXE client back to an iPXE binary (the chainload loop QEMU's iPXE falls into otherwise).
// Method: a decision table over hand-built requests (option 77/175 for iPXE, option 60 for
// UEFI HTTP boot and PXE ROMs, option 93 architectures, absent 93 with the hardware record as
// fallback), plus allowPXE off, per-hardware overrides and invalid settings.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { DhcpPacket } from '../../src/boot/dhcp/codec.js';
import { DhcpSettingsError } from '../../src/boot/dhcp/errors.js';
import type { DhcpOptions } from '../../src/boot/dhcp/options.js';
import {
  decideBoot,
  defaultIpxeBinaries,
  isIpxeClient,
  type BootDecision,
  type NetbootSettings,
} from '../../src/boot/dhcp/pxe-policy.js';

const vip = '10.0.0.100';
const scriptUrl = 'http://10.0.0.100:8080/ipxe/52-54-00-12-34-56/boot.ipxe';

const netboot: NetbootSettings = {
  allowPXE: true,
  arch: 'x86_64',
  uefi: false,
  ipxeScriptUrl: scriptUrl,
  tftpServer: vip,
  httpBinaryBaseUrl: 'http://10.0.0.100:8080/ipxe/binary',
};

function request(options: DhcpOptions, flags = 0): DhcpPacket {
  return {
    op: 'request',
    htype: 1,
    hlen: 6,
    hops: 0,
    xid: 1,
    secs: 0,
    flags,
    ciaddr: '0.0.0.0',
    yiaddr: '0.0.0.0',
    siaddr: '0.0.0.0',
    giaddr: '0.0.0.0',
    chaddr: Uint8Array.from([0x52, 0x54, 0x00, 0x12, 0x34, 0x56, ...new Array<number>(10).fill(0)]),
    sname: '',
    file: '',
    options: { messageType: 'DISCOVER', ...options },
  };
}

const pxeRom = (arch: number): DhcpOptions => ({
  vendorClass: `PXEClient:Arch:${String(arch).padStart(5, '0')}:UNDI:002001`,
  clientArch: [arch],
});
const ipxeRom: DhcpOptions = {
  ...pxeRom(0),
  userClass: { format: 'plain', classes: ['iPXE'] },
  ipxe: { raw: Uint8Array.of(0x13, 1, 1, 255), subOptions: [{ code: 0x13, data: Uint8Array.of(1) }] },
};

function bootfileOf(decision: BootDecision): string {
  assert.equal(decision.kind, 'boot', decision.reason);
  return decision.kind === 'boot' ? decision.bootfile : '';
}

function noBootReason(decision: BootDecision): string {
  assert.equal(decision.kind, 'no-boot', `expected no-boot, got ${JSON.stringify(decision)}`);
  return decision.reason;
}

void describe('iPXE clients go straight to the HTTP script', () => {
  void it('user class "iPXE" in the plain form', () => {
    const d = decideBoot(
      request({ ...pxeRom(7), userClass: { format: 'plain', classes: ['iPXE'] } }),
      netboot,
    );
    assert.equal(bootfileOf(d), scriptUrl);
    assert.equal(d.kind === 'boot' && d.client, 'ipxe');
  });

  void it('user class "iPXE" in the RFC 3004 form', () => {
    const d = decideBoot(request({ userClass: { format: 'rfc3004', classes: ['lab', 'iPXE'] } }), netboot);
    assert.equal(bootfileOf(d), scriptUrl);
  });

  void it('option 175 alone', () => {
    const d = decideBoot(request({ ...pxeRom(0), ipxe: ipxeRom.ipxe! }), netboot);
    assert.equal(bootfileOf(d), scriptUrl);
  });

  void it('breaks the loop: ROM iPXE and chained undionly iPXE differ only in the broadcast flag, and neither gets a binary', () => {
    const rom = decideBoot(request(ipxeRom, 0x8000), netboot);
    const chained = decideBoot(request(ipxeRom, 0), netboot);
    assert.deepEqual(rom, chained);
    assert.equal(bootfileOf(rom), scriptUrl);
    assert.notEqual(bootfileOf(rom), defaultIpxeBinaries.bios);
  });

  void it('wins over the HTTPClient vendor class', () => {
    const d = decideBoot(request({ ...ipxeRom, vendorClass: 'HTTPClient:Arch:00016:UNDI:003001' }), netboot);
    assert.equal(bootfileOf(d), scriptUrl);
  });

  void it('uses the hardware custom script when set', () => {
    const custom = 'https://example.net/custom.ipxe';
    const d = decideBoot(request(ipxeRom), { ...netboot, customIpxeScriptUrl: custom });
    assert.equal(bootfileOf(d), custom);
  });

  void it('is detected only by 77 "iPXE" or 175', () => {
    assert.equal(isIpxeClient(request(ipxeRom)), true);
    assert.equal(isIpxeClient(request(pxeRom(0))), false);
    assert.equal(isIpxeClient(request({ userClass: { format: 'plain', classes: ['iPXE-like'] } })), false);
  });
});

void describe('UEFI HTTP boot', () => {
  void it('gets an HTTP URL to ipxe.efi and option 60 "HTTPClient" echoed', () => {
    const d = decideBoot(
      request({ vendorClass: 'HTTPClient:Arch:00016:UNDI:003001', clientArch: [16] }),
      netboot,
    );
    assert.deepEqual(d, {
      kind: 'boot',
      client: 'http-boot',
      bootfile: 'http://10.0.0.100:8080/ipxe/binary/ipxe.efi',
      nextServer: vip,
      vendorClassEcho: 'HTTPClient',
      reason: 'UEFI HTTP boot, architecture 16 (x64 UEFI HTTP): ipxe.efi over HTTP',
    });
  });

  void it('gets the arm64 binary for architecture 19, joining a base URL with a trailing slash', () => {
    const d = decideBoot(request({ vendorClass: 'HTTPClient', clientArch: [19] }), {
      ...netboot,
      httpBinaryBaseUrl: 'http://vip/b/',
    });
    assert.equal(bootfileOf(d), 'http://vip/b/snp.efi');
  });

  void it('is refused for 32-bit ARM (18) and for a BIOS architecture', () => {
    assert.match(
      noBootReason(decideBoot(request({ vendorClass: 'HTTPClient', clientArch: [18] }), netboot)),
      /32-bit ARM/,
    );
    assert.match(
      noBootReason(decideBoot(request({ vendorClass: 'HTTPClient', clientArch: [0] }), netboot)),
      /needs UEFI/,
    );
  });
});

void describe('PXE ROMs by option 93', () => {
  const table: [number, string][] = [
    [0, 'undionly.kpxe'],
    [6, 'ipxe.efi'],
    [7, 'ipxe.efi'],
    [9, 'ipxe.efi'],
    [11, 'snp.efi'],
  ];
  for (const [arch, file] of table) {
    void it(`architecture ${arch} -> ${file} over TFTP from the VIP, skipping PXE discovery`, () => {
      const d = decideBoot(request(pxeRom(arch)), netboot);
      assert.equal(d.kind, 'boot');
      if (d.kind !== 'boot') return;
      assert.equal(d.bootfile, file);
      assert.equal(d.client, 'pxe');
      assert.equal(d.nextServer, vip);
      assert.equal(d.pxeDiscoveryControl, 8);
      assert.equal(d.vendorClassEcho, undefined);
    });
  }

  void it('refuses 32-bit ARM EFI (10) with a reason', () => {
    assert.match(
      noBootReason(decideBoot(request(pxeRom(10)), netboot)),
      /architecture 10 \(EFI ARM32\) refused/,
    );
  });

  void it('refuses an unknown architecture with a reason naming it', () => {
    assert.match(
      noBootReason(decideBoot(request(pxeRom(42)), netboot)),
      /architecture 42 is not one Slipway knows/,
    );
  });

  void it('uses the first architecture it knows when the client lists several', () => {
    assert.equal(
      bootfileOf(decideBoot(request({ ...pxeRom(42), clientArch: [42, 7] }), netboot)),
      'ipxe.efi',
    );
  });

  void it('falls back to the hardware record when option 93 is absent', () => {
    const rom = request({ vendorClass: 'PXEClient' });
    assert.equal(bootfileOf(decideBoot(rom, netboot)), 'undionly.kpxe');
    assert.equal(bootfileOf(decideBoot(rom, { ...netboot, uefi: true })), 'ipxe.efi');
    assert.equal(bootfileOf(decideBoot(rom, { ...netboot, arch: 'arm64', uefi: true })), 'snp.efi');
  });

  void it('honours a custom binaries table', () => {
    const d = decideBoot(request(pxeRom(11)), netboot, { ...defaultIpxeBinaries, efiArm64: 'arm64/snp.efi' });
    assert.equal(bootfileOf(d), 'arm64/snp.efi');
  });

  void it('sends no PXE discovery control to a client that has option 93 but no PXEClient vendor class', () => {
    const d = decideBoot(request({ clientArch: [7] }), netboot);
    assert.equal(d.kind === 'boot' && d.pxeDiscoveryControl, undefined);
    assert.equal(bootfileOf(d), 'ipxe.efi');
  });
});

void describe('what overrides what', () => {
  void it('allowPXE off gives no boot information, even to iPXE', () => {
    const off = { ...netboot, allowPXE: false };
    assert.match(noBootReason(decideBoot(request(ipxeRom), off)), /allowPXE is off/);
    assert.match(noBootReason(decideBoot(request(pxeRom(7)), off)), /allowPXE is off/);
  });

  void it('a hardware binary override beats the architecture, even a refused one', () => {
    const pinned = { ...netboot, ipxeBinary: 'snponly.efi' };
    assert.equal(bootfileOf(decideBoot(request(pxeRom(0)), pinned)), 'snponly.efi');
    assert.equal(bootfileOf(decideBoot(request(pxeRom(10)), pinned)), 'snponly.efi');
    assert.equal(
      bootfileOf(decideBoot(request({ vendorClass: 'HTTPClient', clientArch: [16] }), pinned)),
      'http://10.0.0.100:8080/ipxe/binary/snponly.efi',
    );
  });

  void it('an ordinary DHCP client (no PXE vendor class, no option 93) gets no boot information', () => {
    const d = decideBoot(request({ vendorClass: 'udhcp 1.35.0' }), netboot);
    assert.match(noBootReason(d), /not a network-boot client/);
  });

  void it('an invalid TFTP server address is a settings error', () => {
    assert.throws(
      () => decideBoot(request(pxeRom(0)), { ...netboot, tftpServer: 'vip.example' }),
      (e: unknown) => e instanceof DhcpSettingsError && e.field === 'tftpServer',
    );
  });
});
