// Goal: prove that hardware documents (YAML or JSON) and `hardware create` flags become the same
// normalised HardwareInput, with defaults filled in, and that every bad field is refused with
// its path and, for YAML, its line.
// Method: pure calls to parseHardwareDocument and hardwareFromFlags; fixtures are written line by
// line so the expected line of each error is found by searching the fixture.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  hardwareFromFlags,
  HardwareDocumentError,
  leaseTimeSDefault,
  parseHardwareDocument,
} from '../../src/workflow/hardware-doc.js';
import { normalizeMac } from '../../src/platform/addresses.js';
import type { HardwareInput } from '../../src/model/records.js';

const fullYaml = [
  'id: node-17',
  'arch: arm64',
  'uefi: true',
  'interfaces:',
  '  - mac: AA-BB-CC-DD-EE-01',
  '    ip: 10.0.0.17/24',
  '    gateway: 10.0.0.1',
  '    dns: [10.0.0.2, 10.0.0.3]',
  '    hostname: node17.lab',
  '    leaseTime: 3600',
  '    vlan: 12',
  '  - mac: "aa:bb:cc:dd:ee:02"',
  '    ip: {address: 10.1.0.17, prefix: 16}',
  'netboot:',
  '  allowPXE: false',
  '  ipxeUrl: http://10.0.0.1/boot.ipxe',
  'metadata:',
  '  rack: {row: 3, slot: "b"}',
  '  disks: [/dev/sda]',
  'bmc:',
  '  address: 10.0.9.17',
  '  username: admin',
  '  secretRef: bmc-node-17',
].join('\n');

const fullInput: HardwareInput = {
  id: 'node-17',
  arch: 'arm64',
  uefi: true,
  interfaces: [
    {
      mac: 'aa:bb:cc:dd:ee:01',
      ip: { address: '10.0.0.17', prefix: 24 },
      gateway: '10.0.0.1',
      dns: ['10.0.0.2', '10.0.0.3'],
      hostname: 'node17.lab',
      leaseTimeS: 3600,
      vlan: 12,
    },
    {
      mac: 'aa:bb:cc:dd:ee:02',
      ip: { address: '10.1.0.17', prefix: 16 },
      dns: [],
      leaseTimeS: leaseTimeSDefault,
    },
  ],
  netboot: { allowPXE: false, allowWorkflow: true, ipxeUrl: 'http://10.0.0.1/boot.ipxe' },
  metadata: { rack: { row: 3, slot: 'b' }, disks: ['/dev/sda'] },
  bmc: { address: 'ipmi://10.0.9.17:623', username: 'admin', secretRef: 'bmc-node-17' },
};

function documentError(run: () => unknown): HardwareDocumentError {
  try {
    run();
  } catch (error) {
    assert.ok(
      error instanceof HardwareDocumentError,
      `expected a HardwareDocumentError, got ${String(error)}`,
    );
    return error;
  }
  assert.fail('expected a HardwareDocumentError, but nothing was thrown');
}

function lineContaining(source: string, text: string): number {
  const index = source.split('\n').findIndex((line) => line.includes(text));
  assert.ok(index >= 0, `fixture has no line containing ${text}`);
  return index + 1;
}

describe('parseHardwareDocument', () => {
  it('reads a full YAML document into a normalised HardwareInput', () => {
    assert.deepEqual(parseHardwareDocument(fullYaml), fullInput);
  });

  it('reads the same document as JSON', () => {
    const json = JSON.stringify(
      {
        id: 'node-17',
        arch: 'arm64',
        uefi: true,
        interfaces: [
          {
            mac: 'aa:bb:cc:dd:ee:01',
            ip: '10.0.0.17/24',
            gateway: '10.0.0.1',
            dns: ['10.0.0.2', '10.0.0.3'],
            hostname: 'node17.lab',
            leaseTime: 3600,
            vlan: 12,
          },
          { mac: 'AA:BB:CC:DD:EE:02', ip: { address: '10.1.0.17', prefix: 16 } },
        ],
        netboot: { allowPXE: false, ipxeUrl: 'http://10.0.0.1/boot.ipxe' },
        metadata: { rack: { row: 3, slot: 'b' }, disks: ['/dev/sda'] },
        bmc: { address: '10.0.9.17', username: 'admin', secretRef: 'bmc-node-17' },
      },
      null,
      '\t',
    );
    assert.deepEqual(parseHardwareDocument(json), fullInput);
  });

  it('reads back the JSON of a HardwareInput unchanged', () => {
    assert.deepEqual(parseHardwareDocument(JSON.stringify(fullInput)), fullInput);
  });

  it('fills in the defaults', () => {
    const input = parseHardwareDocument('id: n1\ninterfaces:\n  - mac: 00:11:22:33:44:55\n');
    assert.deepEqual(input, {
      id: 'n1',
      arch: 'x86_64',
      uefi: false,
      interfaces: [{ mac: '00:11:22:33:44:55', dns: [], leaseTimeS: 86400 }],
      netboot: { allowPXE: true, allowWorkflow: true },
      metadata: {},
    });
  });

  it('names the path and the line of a bad MAC', () => {
    const source = fullYaml.replace('AA-BB-CC-DD-EE-01', '"zz:1"');
    const error = documentError(() => parseHardwareDocument(source));
    assert.equal(error.line, 5);
    assert.equal(
      error.message,
      'line 5: interfaces[0].mac: "zz:1" is not a MAC address (want aa:bb:cc:dd:ee:ff)',
    );
  });

  const fieldCases: readonly { readonly from: string; readonly to: string; readonly message: string }[] = [
    {
      from: 'arch: arm64',
      to: 'arch: sparc',
      message: 'arch: must be one of "x86_64", "arm64", got "sparc"',
    },
    { from: 'uefi: true', to: 'uefi: "yes"', message: 'uefi: must be true or false, got "yes"' },
    {
      from: 'ip: 10.0.0.17/24',
      to: 'ip: 10.0.0.17',
      message: 'interfaces[0].ip: "10.0.0.17" is not an IPv4 address with a prefix length (want 10.0.0.5/24)',
    },
    {
      from: 'ip: 10.0.0.17/24',
      to: 'ip: 10.0.0.300/24',
      message:
        'interfaces[0].ip: "10.0.0.300/24" is not an IPv4 address with a prefix length (want 10.0.0.5/24)',
    },
    { from: 'prefix: 16', to: 'prefix: 33', message: 'interfaces[1].ip.prefix: must be at most 32, got 33' },
    {
      from: 'gateway: 10.0.0.1',
      to: 'gateway: gw.lab',
      message: 'interfaces[0].gateway: "gw.lab" is not an IPv4 address (want a.b.c.d)',
    },
    {
      from: 'dns: [10.0.0.2, 10.0.0.3]',
      to: 'dns: 10.0.0.2',
      message: 'interfaces[0].dns: must be a list, got "10.0.0.2"',
    },
    {
      from: 'hostname: node17.lab',
      to: 'hostname: node_17',
      message:
        'interfaces[0].hostname: "node_17" is not a hostname (letters, digits and "-" in dot-separated labels)',
    },
    {
      from: 'leaseTime: 3600',
      to: 'leaseTime: 0',
      message: 'interfaces[0].leaseTime: must be at least 1, got 0',
    },
    {
      from: 'leaseTime: 3600',
      to: 'leaseTime: 1.5',
      message: 'interfaces[0].leaseTime: must be a whole number, got 1.5',
    },
    { from: 'vlan: 12', to: 'vlan: 4095', message: 'interfaces[0].vlan: must be at most 4094, got 4095' },
    {
      from: 'allowPXE: false',
      to: 'allowPXE: no',
      message: 'netboot.allowPXE: must be true or false, got "no"',
    },
    {
      from: 'ipxeUrl: http://10.0.0.1/boot.ipxe',
      to: 'ipxeUrl: tftp://x/y',
      message: 'netboot.ipxeUrl: "tftp://x/y" is not an http:// or https:// URL',
    },
    {
      from: 'id: node-17',
      to: 'id: "node 17"',
      message: 'id: "node 17" is not a hardware id (1-128 letters, digits, ".", "_", ":" or "-")',
    },
    {
      from: 'id: node-17',
      to: 'id: "00:11:22:33:44:55"',
      message: "id: must not look like a MAC address: a task's worker names either one",
    },
    {
      from: 'disks: [/dev/sda]',
      to: 'disks: !!binary aGVsbG8=',
      message:
        'metadata.disks: must be JSON data (strings, numbers, booleans, null, lists and mappings), got binary data',
    },
  ];
  for (const { from, to, message } of fieldCases) {
    it(`refuses ${to} with its path and line`, () => {
      assert.ok(fullYaml.includes(from), `fixture lacks ${from}`);
      const source = fullYaml.replace(from, to);
      const error = documentError(() => parseHardwareDocument(source));
      assert.equal(error.message, `line ${lineContaining(source, to)}: ${message}`);
    });
  }

  it('refuses unknown fields by name, with a suggestion and the line', () => {
    const source = fullYaml
      .replace('    gateway:', '    gatway:')
      .replace('  username: admin', '  username: admin\n  passwordSet: true');
    const error = documentError(() => parseHardwareDocument(source));
    assert.deepEqual(
      error.problems.map((problem) => problem.line),
      [lineContaining(source, 'gatway'), lineContaining(source, 'passwordSet')],
    );
    assert.match(
      error.message,
      /^line 7: interfaces\[0\]\.gatway: unknown field \(did you mean "gateway"\?\); allowed here: mac, ip,/,
    );
    assert.match(
      error.message,
      /\nline 23: bmc\.passwordSet: unknown field; give the password itself \(get\/list never show it\);/,
    );
  });

  it('refuses a missing id and an empty interface list', () => {
    const error = documentError(() => parseHardwareDocument('arch: x86_64\ninterfaces: []\n'));
    assert.equal(error.message, 'line 1: id: is required\nline 2: interfaces: must have at least 1 entry');
  });

  it('refuses the same MAC twice, however it is spelled', () => {
    const source = 'id: n1\ninterfaces:\n  - mac: 00:11:22:33:44:55\n  - mac: 00-11-22-33-44-55\n';
    const error = documentError(() => parseHardwareDocument(source));
    assert.equal(error.message, 'line 4: interfaces[1].mac: 00:11:22:33:44:55 is already interfaces[0].mac');
  });

  it('refuses both an iPXE script and an iPXE URL, and a script without its header', () => {
    const both = fullYaml.replace('  allowPXE: false', '  allowPXE: false\n  ipxeScript: "#!ipxe\\nboot"');
    assert.match(
      documentError(() => parseHardwareDocument(both)).message,
      /netboot\.ipxeUrl: give ipxeScript or ipxeUrl, not both/,
    );
    const headless = fullYaml.replace(
      '  ipxeUrl: http://10.0.0.1/boot.ipxe',
      '  ipxeScript: "chain http://x"',
    );
    assert.match(
      documentError(() => parseHardwareDocument(headless)).message,
      /netboot\.ipxeScript: must start with "#!ipxe"/,
    );
  });

  it('refuses YAML syntax errors, non-mappings and oversized documents', () => {
    const syntax = documentError(() => parseHardwareDocument('id: n1\ninterfaces: [\n'));
    assert.match(syntax.message, /^line \d+: YAML syntax: /);
    assert.equal(
      documentError(() => parseHardwareDocument('[1, 2]')).message,
      'line 1: a hardware document must be a mapping, got a list',
    );
    const big = documentError(() => parseHardwareDocument(`# ${'x'.repeat(300 * 1024)}\n${fullYaml}`));
    assert.match(big.message, /^the document is \d+ bytes; at most 262144 are allowed$/);
  });
});

describe('hardwareFromFlags', () => {
  it('builds the same HardwareInput as a document', () => {
    const fromFlags = hardwareFromFlags({
      id: 'n1',
      mac: 'AA-BB-CC-DD-EE-01',
      ip: '10.0.0.5/24',
      gateway: '10.0.0.1',
      uefi: true,
    });
    const fromDocument = parseHardwareDocument(
      'id: n1\nuefi: true\ninterfaces:\n  - {mac: "aa:bb:cc:dd:ee:01", ip: 10.0.0.5/24, gateway: 10.0.0.1}\n',
    );
    assert.deepEqual(fromFlags, fromDocument);
    assert.equal(fromFlags.arch, 'x86_64');
  });

  it('leaves out flags given as undefined', () => {
    const input = hardwareFromFlags({
      id: 'n1',
      mac: '00:11:22:33:44:55',
      ip: '10.0.0.5/24',
      gateway: undefined,
      arch: 'arm64',
    });
    assert.equal(input.interfaces[0]?.gateway, undefined);
    assert.equal(Object.hasOwn(input.interfaces[0] ?? {}, 'gateway'), false);
    assert.equal(input.arch, 'arm64');
  });

  it('names the flags in its errors', () => {
    const error = documentError(() =>
      hardwareFromFlags({ id: 'n 1', mac: 'x', ip: '10.0.0.5/99', gateway: 'gw', arch: 'mips' }),
    );
    assert.deepEqual(error.message.split('\n'), [
      '--id: "n 1" is not a hardware id (1-128 letters, digits, ".", "_", ":" or "-")',
      '--arch: must be one of "x86_64", "arm64", got "mips"',
      '--mac: "x" is not a MAC address (want aa:bb:cc:dd:ee:ff)',
      '--ip: "10.0.0.5/99" is not an IPv4 address with a prefix length (want 10.0.0.5/24)',
      '--gateway: "gw" is not an IPv4 address (want a.b.c.d)',
    ]);
  });
});

describe('normalizeMac', () => {
  it('lower-cases and uses colons, refusing mixed separators and wrong lengths', () => {
    assert.equal(normalizeMac('AA-BB-CC-DD-EE-FF'), 'aa:bb:cc:dd:ee:ff');
    assert.equal(normalizeMac('aa:bb:cc:dd:ee:ff'), 'aa:bb:cc:dd:ee:ff');
    assert.equal(normalizeMac('aa:bb-cc:dd:ee:ff'), undefined);
    assert.equal(normalizeMac('aa:bb:cc:dd:ee'), undefined);
    assert.equal(normalizeMac('aabb.ccdd.eeff'), undefined);
  });
});
