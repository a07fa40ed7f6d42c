// Goal: the Go-template forms Tinkerbell's docs and examples write render the value Tinkerbell
// would give, from the machine as Slipway holds it (what `slipway import` kept in its metadata
// included), in a value and in a shell command line; every other Go form is refused at
// `template create` naming the expression as written and its line; rendering stays strict, and
// lines point into the operator's text (docs/decisions/0042-go-template-forms.md).
// Method: pure calls to validateTemplateSource and renderTemplate on templates built line by
// line, for a machine shaped as the import stores one, and for one with only an inventory.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Hardware } from '../../src/model/records.js';
import { goName, netmaskOf } from '../../src/workflow/template-go-hardware.js';
import { rewriteGoForms } from '../../src/workflow/template-go.js';
import { renderTemplate, TemplateError, validateTemplateSource } from '../../src/workflow/template.js';
import { exampleInventory } from '../support/inventory-arbitrary.js';

/** A machine as `slipway import` stores a Tinkerbell Hardware (src/tinkerbell/hardware.ts). */
const imported: Hardware = {
  id: 'sm01',
  interfaces: [
    {
      mac: '3c:ec:ef:4c:4f:54',
      ip: { address: '10.0.0.21', prefix: 24 },
      gateway: '10.0.0.1',
      dns: ['10.0.0.2', '10.0.0.3'],
      hostname: 'sm01',
      leaseTimeS: 86400,
      vlan: 7,
    },
    { mac: '3c:ec:ef:4c:4f:55', dns: [], leaseTimeS: 3600 },
  ],
  arch: 'arm64',
  uefi: true,
  netboot: { allowPXE: true, allowWorkflow: true },
  metadata: {
    instance: {
      id: '3c:ec:ef:4c:4f:54',
      hostname: 'sm01',
      operating_system: { distro: 'ubuntu', version: '22.04', os_slug: 'ubuntu_22_04' },
      ipxe_script_url: 'http://10.0.0.1/auto.ipxe',
      ssh_keys: ['ssh-ed25519 AAAA sm01'],
    },
    facility: { facility_code: 'onprem', plan_slug: 'c3.small' },
    tinkerbell: {
      name: 'sm01',
      namespace: 'tink-system',
      disks: ['/dev/nvme0n1', '/dev/sda'],
      spec: {
        disks: [{ device: '/dev/nvme0n1' }, { device: '/dev/sda' }],
        userData: '#cloud-config\n',
        interfaces: [
          {
            dhcp: {
              mac: '3C:EC:EF:4C:4F:54',
              arch: 'aarch64',
              iface_name: 'eno1',
              time_servers: ['10.0.0.9'],
              ip: { address: '10.0.0.21', netmask: '255.255.255.0', gateway: '10.0.0.1' },
            },
            netboot: { allowPXE: true, allowWorkflow: true, ipxe: { url: 'http://10.0.0.1/x.ipxe' } },
            disableDhcp: false,
          },
        ],
      },
    },
  },
  workerTokenSha256: '',
  createdMs: 0,
  updatedMs: 0,
  version: 1,
};

/** A machine created with `hardware create`, whose disks are those it reported. */
const native: Hardware = {
  ...imported,
  id: 'n1',
  arch: 'x86_64',
  interfaces: [{ mac: '52:54:00:00:00:01', dns: [], leaseTimeS: 3600 }],
  metadata: { rack: 'a4' },
  inventory: exampleInventory,
};

const header = ['version: "0.1"', 'name: t', 'global_timeout: 60', 'tasks:', '  - name: only'];

/** A template whose one action has these environment lines (line 10 is the first). */
function withEnvironment(lines: readonly string[]): string {
  return [
    ...header,
    '    worker: "{{.device_1}}"',
    '    actions:',
    '      - name: a',
    '        environment:',
    ...lines.map((line) => `          ${line}`),
    '        command: [true]',
    '',
  ].join('\n');
}

function render(source: string, hardware: Hardware = imported): Readonly<Record<string, string>> {
  validateTemplateSource(source);
  const spec = renderTemplate(source, {
    workflowId: 'wf-1',
    hardware,
    hardwareMap: { device_1: hardware.interfaces[0]?.mac ?? '' },
    resolveWorker: () => hardware.id,
  });
  return spec.tasks[0]?.actions[0]?.env ?? {};
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof TemplateError, `expected a TemplateError, got ${String(error)}`);
    return error.message;
  }
  assert.fail('expected a TemplateError, but nothing was thrown');
}

describe('Go forms that render', () => {
  it('gives what Tinkerbell gives for the forms of its docs and examples', () => {
    const cases: readonly (readonly [string, string])[] = [
      ['{{.device_1}}', '3c:ec:ef:4c:4f:54'],
      ['{{ index .Hardware.Disks 0 }}', '/dev/nvme0n1'],
      ['{{ (index .Hardware.Disks 1) }}', '/dev/sda'],
      ['{{ formatPartition ( index .Hardware.Disks 0 ) 1 }}', '/dev/nvme0n1p1'],
      ['{{ formatPartition (index .Hardware.Disks 1) 3 }}', '/dev/sda3'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.MAC }}', '3c:ec:ef:4c:4f:54'],
      ['{{ (index .Hardware.Interfaces 1).DHCP.MAC }}', '3c:ec:ef:4c:4f:55'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.IP.Address }}', '10.0.0.21'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.IP.Netmask }}', '255.255.255.0'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.IP.Gateway }}', '10.0.0.1'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.Hostname }}', 'sm01'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.VLANID }}', '7'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.Arch }}', 'aarch64'],
      ['{{ (index .Hardware.Interfaces 0).DHCP.IfaceName }}', 'eno1'],
      ['{{ index (index .Hardware.Interfaces 0).DHCP.NameServers 1 }}', '10.0.0.3'],
      ['{{ index (index .Hardware.Interfaces 0).DHCP.TimeServers 0 }}', '10.0.0.9'],
      ['{{ (index .Hardware.Interfaces 0).Netboot.IPXE.URL }}', 'http://10.0.0.1/x.ipxe'],
      ['{{ netmaskToPrefixLength (index .Hardware.Interfaces 0).DHCP.IP.Netmask }}', '24'],
      ['{{ .Hardware.Metadata.Instance.ID }}', '3c:ec:ef:4c:4f:54'],
      ['{{ .Hardware.Metadata.Instance.OperatingSystem.OsSlug }}', 'ubuntu_22_04'],
      ['{{ .Hardware.Metadata.Instance.IpxeScriptURL }}', 'http://10.0.0.1/auto.ipxe'],
      ['{{ index .Hardware.Metadata.Instance.SSHKeys 0 }}', 'ssh-ed25519 AAAA sm01'],
      ['{{ .Hardware.Metadata.Facility.FacilityCode }}', 'onprem'],
      ['{{ index .Hardware.Metadata "Facility" "PlanSlug" }}', 'c3.small'],
      ['{{ .Hardware.UserData }}', '#cloud-config\n'],
      ['a {{- .Hardware.Metadata.Instance.Hostname -}} b', 'asm01b'],
      ['{{/* a comment */}}x{{- /* trimmed */ -}} y', 'xy'],
    ];
    for (const [written, expected] of cases) {
      const env = render(withEnvironment([`V: ${JSON.stringify(written)}`]));
      assert.equal(env['V'], expected, written);
    }
  });

  it('reads Disks from the inventory of a machine that was not imported, Metadata from its own', () => {
    const env = render(
      withEnvironment([
        'DISK: "{{ index .Hardware.Disks 0 }}"',
        'PART: "{{ formatPartition (index .Hardware.Disks 0) 2 }}"',
        'RACK: "{{ .Hardware.Metadata.Rack }}"',
        'ARCH: "{{ (index .Hardware.Interfaces 0).DHCP.Arch }}"',
      ]),
      native,
    );
    const disk = exampleInventory.disks[0]?.path ?? '';
    assert.deepEqual(env, { DISK: disk, PART: `${disk}2`, RACK: 'a4', ARCH: 'x86_64' });
  });

  it("a value that is one unquoted placeholder, as Tinkerbell's examples write them, is its text", () => {
    const source = withEnvironment([
      'DEST_DISK: {{ index .Hardware.Disks 0 }}',
      'BLOCK_DEVICE: {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}',
    ]).replace('worker: "{{.device_1}}"', 'worker: {{.device_1}}');
    assert.deepEqual(render(source), { DEST_DISK: '/dev/nvme0n1', BLOCK_DEVICE: '/dev/nvme0n1p1' });
    assert.match(
      refusal(() => validateTemplateSource(withEnvironment(['A: x', 'B: {{ .x | upper }}']))),
      /^line 11: "\{\{ \.x \| upper \}\}" is a Go template form Slipway does not render: pipelines/,
    );
  });

  it('formatPartition names partitions as Linux does', () => {
    const disks = ['/dev/sda', '/dev/nvme0n1', '/dev/disk/by-id/wwn-0x5000', '/dev/mmcblk0'];
    const machine = { ...imported, metadata: { tinkerbell: { disks } } };
    const env = render(
      withEnvironment(disks.map((_, i) => `P${i}: "{{ formatPartition (index .Hardware.Disks ${i}) 2 }}"`)),
      machine,
    );
    assert.deepEqual(Object.values(env), [
      '/dev/sda2',
      '/dev/nvme0n1p2',
      '/dev/disk/by-id/wwn-0x5000-part2',
      '/dev/mmcblk0p2',
    ]);
  });

  it('a shell command line gets each value through the environment, never as code', () => {
    const source = [
      ...header,
      '    actions:',
      '      - name: grow',
      '        command: "growpart {{ index .Hardware.Disks 0 }} 1 && resize2fs {{ formatPartition ( index .Hardware.Disks 0 ) 1 }}"',
      '',
    ].join('\n');
    const disks = ['/dev/sda; reboot'];
    validateTemplateSource(source);
    const action = renderTemplate(source, {
      workflowId: 'wf-1',
      hardware: { ...imported, metadata: { tinkerbell: { disks } } },
      hardwareMap: {},
      resolveWorker: () => 'sm01',
    }).tasks[0]?.actions[0];
    assert.deepEqual(action?.command, [
      '/bin/sh',
      '-c',
      'growpart "${SLIPWAY_VALUE_1}" 1 && resize2fs "${SLIPWAY_VALUE_2}"',
    ]);
    assert.equal(action?.env['SLIPWAY_VALUE_1'], '/dev/sda; reboot');
    assert.equal(action?.env['SLIPWAY_VALUE_2'], '/dev/sda; reboot1');
  });

  it('spells JSON keys as Go does, and netmasks from prefixes', () => {
    const names = ['id', 'operating_system', 'allowPXE', 'ipxe', 'ipxe_script_url', 'vlan_id', 'disableDhcp'];
    assert.deepEqual(names.map(goName), [
      'ID',
      'OperatingSystem',
      'AllowPXE',
      'IPXE',
      'IpxeScriptURL',
      'VLANID',
      'DisableDHCP',
    ]);
    assert.deepEqual([0, 8, 23, 32].map(netmaskOf), [
      '0.0.0.0',
      '255.0.0.0',
      '255.255.254.0',
      '255.255.255.255',
    ]);
  });
});

describe('strict rendering', () => {
  it('a disk or interface the machine does not have is an error naming the expression and line', () => {
    const source = withEnvironment(['A: x', 'B: "{{ formatPartition (index .Hardware.Disks 2) 1 }}"']);
    assert.equal(
      refusal(() => render(source)),
      'line 11: "{{ formatPartition (index .Hardware.Disks 2) 1 }}": Hardware.Disks.[2] is not defined ' +
        "for this machine (.Hardware.Disks lists an imported Tinkerbell Hardware's disks, else the disks " +
        "of the machine's inventory)",
    );
    const { inventory: _inventory, ...noDisks } = native;
    assert.match(
      refusal(() => render(withEnvironment(['A: "{{ index .Hardware.Disks 0 }}"']), noDisks)),
      /^line 10: "\{\{ index \.Hardware\.Disks 0 \}\}": Hardware\.Disks\.\[0\] is not defined for this machine/,
    );
    assert.match(
      refusal(() => render(withEnvironment(['A: "{{ (index .Hardware.Interfaces 1).DHCP.IP.Address }}"']))),
      /^line 10: "\{\{ \(index \.Hardware\.Interfaces 1\)\.DHCP\.IP\.Address \}\}": Hardware\.Interfaces\.\[1\]\.DHCP\.IP\.Address is not defined/,
    );
  });

  it('a list or mapping printed whole is refused as before', () => {
    assert.match(
      refusal(() => render(withEnvironment(['A: "{{ .Hardware.Disks }}"']))),
      /^line 10: template variable "Hardware\.Disks" is a list, not a single value/,
    );
    assert.match(
      refusal(() => render(withEnvironment(['A: "{{ index .Hardware.Interfaces 0 }}"']))),
      /^line 10: template variable "Hardware\.Interfaces\.\[0\]" is a mapping/,
    );
  });

  it("a field Tinkerbell's Hardware never has is refused at template create", () => {
    assert.equal(
      refusal(() => validateTemplateSource(withEnvironment(['A: "{{ .Hardware.Disk }}"']))),
      'line 10: unknown variable Hardware.Disk: Hardware has Disks, Interfaces, Metadata, UserData, VendorData',
    );
    assert.match(
      refusal(() => validateTemplateSource(withEnvironment(['A: "{{ .hardware.spec.disks }}"']))),
      /^line 10: unknown variable hardware\.spec\.disks: Tinkerbell's \.hardware\.spec is not supported; \.Hardware has/,
    );
    assert.match(
      refusal(() =>
        validateTemplateSource(withEnvironment(['A: "{{ (index .Hardware.Interfaces 0).DHCP.Mac }}"'])),
      ),
      /^line 10: unknown variable Hardware\.Interfaces\.\[0\]\.DHCP\.Mac: DHCP has MAC, /,
    );
  });
});

describe('Go forms that are refused', () => {
  const refused: readonly (readonly [string, RegExp])[] = [
    ['{{ range .Hardware.Disks }}x{{ end }}', /range.*\{\{#each x\}\}/],
    ['{{ if .Hardware.UserData }}x{{ end }}', /if.*\{\{#if x\}\}/],
    ['{{ with .Hardware.Metadata }}x{{ end }}', /\{\{#with x\}\}/],
    ['{{ end }}', /\{\{\/if\}\}/],
    ['{{ (index .Hardware.Interfaces 0).DHCP.MAC | replace ":" "-" }}', /pipelines \(\|\)/],
    ['{{ printf "%s-%d" .device_1 1 }}', /printf is a Go template function/],
    ['{{ $disk := index .Hardware.Disks 0 }}', /template variables \(\$x\)/],
    ['{{ $.Hardware.Disks }}', /template variables/],
    ['{{ lower (index .Hardware.Interfaces 0).DHCP.Arch }}', /lower is a Go template function/],
    ['{{ formatPartition (lower .x) 1 }}', /lower is a Go template function/],
    ['{{ formatPartition (lookup .x 0) 1 }}', /lookup inside a function is not supported; use index/],
    ['{{ index .Hardware.Disks .n }}', /an index is a whole number/],
    [
      '{{ formatPartition (index .Hardware.Disks 0) }}',
      /formatPartition takes a disk and a partition number/,
    ],
    ['{{ index (formatPartition (index .Hardware.Disks 0) 1) 0 }}', /formatPartition inside another/],
    ['{{ template "disk" . }}', /named templates are not supported/],
    ['{{ .Hardware.Disks.Method 1 }}', /method calls/],
    ['{{ `raw` }}', /raw strings/],
  ];

  it('names the expression as written and its line, never a parser token', () => {
    for (const [written, reason] of refused) {
      const source = withEnvironment(['A: x', `B: ${JSON.stringify(`first ${written}`)}`]);
      const message = refusal(() => validateTemplateSource(source));
      const shown = JSON.stringify(written.replace(/\}\}x?.*$/, '}}'));
      assert.ok(
        message.startsWith(`line 11: ${shown} is a Go template form Slipway does not render: `),
        `${written}: ${message}`,
      );
      assert.match(message, reason, written);
      assert.doesNotMatch(message, /CLOSE|OPEN|EOF|INVALID|Expecting|knownHelpersOnly/, written);
    }
  });

  it('points at the line inside a literal block, as the operator counts it', () => {
    const source = withEnvironment([
      'SCRIPT: |',
      '  echo one',
      '  echo {{ index .Hardware.Disks 0 }}',
      '  {{- range .Hardware.Disks }} {{ . }} {{- end }}',
    ]);
    assert.equal(
      refusal(() => validateTemplateSource(source)),
      'line 13: "{{- range .Hardware.Disks }}" is a Go template form Slipway does not render: ' +
        'write a Handlebars block instead: {{#each x}}{{this}}{{/each}}, inside one value',
    );
  });

  it('a Go block around YAML lines is named before the YAML error it causes', () => {
    const source = [
      ...header,
      '    actions:',
      '      {{- if eq (index .Hardware.Interfaces 0).DHCP.Arch "aarch64" }}',
      '      - name: reboot',
      '      {{- else }}',
      '      - name: kexec',
      '      {{- end }}',
      '        command: [true]',
      '',
    ].join('\n');
    const lines = refusal(() => validateTemplateSource(source)).split('\n');
    assert.match(lines[0] ?? '', /^line 7: "\{\{- if eq .*" is a Go template form Slipway does not render: /);
    assert.match(lines[1] ?? '', /^line 11: "\{\{- end \}\}" is a Go template form/);
    assert.match(lines.at(-1) ?? '', /YAML syntax/);
  });

  it('Handlebars written in a Slipway template means what it meant', () => {
    const env = render(
      withEnvironment([
        'A: "{{#each hardware.interfaces}}{{mac}} {{/each}}"',
        'B: "{{ lookup hardware.metadata.tinkerbell.disks 1 }}"',
        'C: "{{#if hardware.uefi}}uefi{{else}}bios{{/if}}"',
        'D: "{{~ hardware.id ~}}"',
      ]),
    );
    assert.deepEqual(env, {
      A: '3c:ec:ef:4c:4f:54 3c:ec:ef:4c:4f:55 ',
      B: '/dev/sda',
      C: 'uefi',
      D: 'sm01',
    });
  });

  it('a rewrite keeps every line where it was', () => {
    const source =
      'a {{ index .Hardware.Disks\n 0 }} b\n{{ formatPartition\n(index .Hardware.Disks 0) 1 }}\n{{/* x\ny */}}';
    const { text, refusals } = rewriteGoForms(source);
    assert.deepEqual(refusals, []);
    assert.equal(text.split('\n').length, source.split('\n').length);
    assert.match(text, /^a \{\{ Hardware\.Disks\.\[0\]\n \}\} b\n/);
  });
});

describe('the rewrite, for any text', () => {
  // Fragments of Go and Handlebars forms, whole and cut, joined at random: newlines inside and
  // between mustaches, unterminated ones, strings and comments.
  const fragment = fc.constantFrom(
    '{{',
    '}}',
    '{{- ',
    ' -}}',
    '{{/* ',
    ' */}}',
    '{{!-- ',
    ' --}}',
    '\n',
    ' ',
    '(',
    ')',
    '"',
    '|',
    '$x',
    'index .Hardware.Disks 0',
    'formatPartition',
    '.DHCP.MAC',
    'range',
    'end',
    '#each',
    '/each',
    'lookup',
    '.device_1',
    'x',
  );

  it('keeps every line where it was, and refuses only with a line inside the text', () => {
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 40 }), (parts) => {
        const source = parts.join('');
        const { text, refusals } = rewriteGoForms(source);
        const lines = source.split('\n').length;
        assert.equal(text.split('\n').length, lines, JSON.stringify(source));
        for (const refusal of refusals) {
          assert.ok(refusal.line >= 1 && refusal.line <= lines, JSON.stringify(source));
          assert.ok(source.includes(refusal.written), JSON.stringify(source));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('a refused comment', () => {
  it('keeps its line breaks, so the lines after it keep their numbers', () => {
    const source = '{{/*  --}}\n */}}\n{{ .device_1 }}';
    const { text, refusals } = rewriteGoForms(source);
    assert.equal(text.split('\n').length, 3);
    assert.deepEqual(
      refusals.map((r) => [r.line, r.written]),
      [[1, '{{/*  --}}\n */}}']],
    );
    assert.match(text.split('\n')[2] ?? '', /device_1/);
  });
});
