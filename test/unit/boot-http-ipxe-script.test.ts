// Goal: the per-machine iPXE script says exactly what the machine must do: the generated script
// loads the boot OS kernel and initrd of the machine's architecture from /boot/ and puts the
// worker's identity and where to find the cluster (id, API address, boot HTTP server, MAC) and
// the extra arguments on the kernel command line, with nothing secret on it (invariant 7); a custom script is served as written; a chain URL becomes `chain URL`; anything that
// would change the script's meaning (spaces, ${...}, quotes, line breaks) is refused.
// Method: renderIpxeScript on hardware records built for each case, checking the script line
// by line and the error's field.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  IpxeScriptError,
  defaultBootArtifacts,
  renderIpxeScript,
  type IpxeScriptSettings,
} from '../../src/boot/http/ipxe-script.js';
import type { BootRecord } from '../../src/boot/inventory.js';
import type { Hardware } from '../../src/model/records.js';
import { hardwareRecord, type HardwareSpec } from '../support/netns.js';

const settings: IpxeScriptSettings = {
  httpBaseUrl: 'http://10.0.0.100:8080/',
  apiAddress: '10.0.0.100:7001',
  artifacts: defaultBootArtifacts,
  extraKernelArgs: ['console=ttyS0,115200', 'quiet'],
};

function recordOf(
  spec: Partial<HardwareSpec> = {},
  change: (h: Hardware) => Hardware = (h) => h,
): BootRecord {
  const hardware = change(hardwareRecord({ id: 'rack1-node7', mac: '52:54:00:12:34:56', ...spec }));
  const iface = hardware.interfaces[0];
  assert.ok(iface !== undefined);
  return { hardware, iface };
}

function lines(text: string): string[] {
  return text.split('\n');
}

describe('generated script', () => {
  it('loads the architecture’s kernel and initrd with the worker identity on the command line', () => {
    const script = renderIpxeScript(recordOf(), settings);
    assert.equal(script.kind, 'generated');
    const [header, echo, kernel, initrd, boot, end] = lines(script.text);
    assert.equal(header, '#!ipxe');
    assert.match(echo ?? '', /^echo .*rack1-node7.*52:54:00:12:34:56/);
    assert.equal(
      kernel,
      'kernel http://10.0.0.100:8080/boot/vmlinuz-x86_64 initrd=initramfs-x86_64 ' +
        'slipway.worker_id=rack1-node7 slipway.server=10.0.0.100:7001 slipway.http=http://10.0.0.100:8080 ' +
        'slipway.mac=52:54:00:12:34:56 console=ttyS0,115200 quiet',
    );
    assert.equal(initrd, 'initrd http://10.0.0.100:8080/boot/initramfs-x86_64');
    assert.equal(boot, 'boot');
    assert.equal(end, '');
  });

  it('carries no secret: the worker token appears nowhere in the script', () => {
    const record = recordOf({}, (h) => ({ ...h, workerTokenSha256: 'e'.repeat(64) }));
    const script = renderIpxeScript(record, settings);
    assert.ok(!script.text.includes('e'.repeat(64)), script.text);
    assert.ok(!script.text.includes('token'), script.text);
  });

  it('picks the arm64 artifacts for arm64 hardware and percent-encodes odd file names', () => {
    const arm = recordOf({}, (h) => ({ ...h, arch: 'arm64' }));
    const text = renderIpxeScript(arm, {
      ...settings,
      artifacts: { ...defaultBootArtifacts, arm64: { kernel: 'arm/Image v2', initrd: 'arm/initrd.img' } },
    }).text;
    assert.match(text, /^kernel http:\/\/10\.0\.0\.100:8080\/boot\/arm\/Image%20v2 initrd=initrd\.img /m);
    assert.match(text, /^initrd http:\/\/10\.0\.0\.100:8080\/boot\/arm\/initrd\.img$/m);
  });

  it('refuses values that iPXE would split, expand or unquote', () => {
    const cases: [string, BootRecord, IpxeScriptSettings][] = [
      ['hardware.id', recordOf({ id: 'two words' }), settings],
      ['httpBaseUrl', recordOf(), { ...settings, httpBaseUrl: 'http://10.0.0.100:8080/${x}' }],
      ['apiAddress', recordOf(), { ...settings, apiAddress: '10.0.0.1:7001\nshell' }],
      ['extraKernelArgs[1]', recordOf(), { ...settings, extraKernelArgs: ['ok', 'a"b'] }],
      [
        'artifacts.kernel',
        recordOf(),
        { ...settings, artifacts: { ...defaultBootArtifacts, x86_64: { kernel: '../etc', initrd: 'i' } } },
      ],
    ];
    for (const [field, record, input] of cases) {
      assert.throws(
        () => renderIpxeScript(record, input),
        (error: unknown) => error instanceof IpxeScriptError && error.field === field,
        field,
      );
    }
  });
});

describe('operator overrides', () => {
  it('serves a custom script as written, adding the #!ipxe header when it is missing', () => {
    const written = '#!ipxe\necho custom\nshell\n';
    assert.deepEqual(renderIpxeScript(recordOf({ ipxeScript: written }), settings), {
      kind: 'custom',
      text: written,
    });
    assert.equal(
      renderIpxeScript(recordOf({ ipxeScript: 'echo bare' }), settings).text,
      '#!ipxe\necho bare\n',
    );
  });

  it('chains to ipxeUrl, which may use iPXE settings', () => {
    const url = 'http://images.lab:8080/boot.ipxe?mac=${net0/mac}';
    assert.deepEqual(renderIpxeScript(recordOf({ ipxeUrl: url }), settings), {
      kind: 'chain',
      text: `#!ipxe\nchain ${url}\n`,
    });
  });

  it('prefers the custom script over the chain URL', () => {
    const both = recordOf({ ipxeScript: '#!ipxe\necho mine\n', ipxeUrl: 'http://x/y' });
    assert.equal(renderIpxeScript(both, settings).kind, 'custom');
  });

  it('refuses a chain URL that is not a URL or would inject a command', () => {
    for (const url of ['ftp://x/y', 'http://x/y\nshell', 'http://x/ y', 'http://x/"y"']) {
      assert.throws(
        () => renderIpxeScript(recordOf({ ipxeUrl: url }), settings),
        (error: unknown) => error instanceof IpxeScriptError && error.field === 'netboot.ipxeUrl',
        url,
      );
    }
  });
});
