// Goal: prove that templates are checked before they are stored, rendered for one workflow into a
// fully resolved RenderedTemplate, and refused with errors that name the field path and the
// line: Tinkerbell's `{{.device_1}}` spelling, hardware variables, worker resolution, unknown
// fields, every structural rule, and the size limits.
// Method: pure calls to validateTemplateSource and renderTemplate on YAML fixtures written line by
// line, so the expected line of each error is found by searching the fixture for the offending
// text rather than trusting the YAML library's own mapping.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Hardware, JsonValue } from '../../src/model/records.js';
import {
  renderTemplate,
  TemplateError,
  validateTemplateSource,
  type RenderContext,
} from '../../src/workflow/template.js';
import { exampleInventory } from '../support/inventory-arbitrary.js';
import { rewriteGoStylePaths } from '../../src/workflow/template-placeholders.js';
import { actionsMax, templateSourceBytesMax, tasksMax } from '../../src/workflow/template-limits.js';

const hardware: Hardware = {
  id: 'node-17',
  interfaces: [
    {
      mac: 'aa:bb:cc:dd:ee:01',
      ip: { address: '10.0.0.17', prefix: 24 },
      gateway: '10.0.0.1',
      dns: ['10.0.0.2'],
      hostname: 'node17',
      leaseTimeS: 86400,
    },
    { mac: 'aa:bb:cc:dd:ee:02', dns: [], leaseTimeS: 3600 },
  ],
  arch: 'x86_64',
  uefi: true,
  netboot: { allowPXE: true, allowWorkflow: true },
  metadata: { disk: '/dev/nvme0n1', rack: { row: 3 } },
  workerTokenSha256: 'a'.repeat(64),
  createdMs: 1,
  updatedMs: 1,
  version: 1,
};

const otherMac = 'aa:bb:cc:dd:ee:99';
const knownWorkers = new Map([
  ['node-17', 'node-17'],
  ['aa:bb:cc:dd:ee:01', 'node-17'],
  ['node-18', 'node-18'],
  [otherMac, 'node-18'],
]);

function context(hardwareMap: Record<string, string> = { device_1: 'aa:bb:cc:dd:ee:01' }): RenderContext {
  return { workflowId: 'wf-1', hardware, hardwareMap, resolveWorker: (value) => knownWorkers.get(value) };
}

const tinkerbellTemplate = [
  'version: "0.1"',
  'name: ubuntu-install',
  'global_timeout: 1800',
  'tasks:',
  '  - name: "os-installation"',
  '    worker: "{{.device_1}}"',
  '    volumes:',
  '      - /dev:/dev',
  '    environment:',
  '      MIRROR_HOST: 10.0.0.1',
  '      SHARED: task',
  '    actions:',
  '      - name: "stream-image"',
  '        image: quay.io/tinkerbell-actions/image2disk:v1.0.0',
  '        timeout: 900',
  '        environment:',
  '          IMG_URL: "http://10.0.0.1:8080/{{ .hardware.id }}.raw.gz"',
  '          COMPRESSED: true',
  '          DEST_DISK: "{{ hardware.metadata.disk }}"',
  '          SHARED: action',
  '      - name: "wipe"',
  '        command: ["wipefs", "-a", "{{ hardware.metadata.disk }}"]',
  '        args: [--force, 3]',
  '        retries: 2',
  '        volumes: [/tmp:/tmp, /dev:/dev]',
].join('\n');

/** The 1-based line of the first line of `source` containing `text`. */
function lineContaining(source: string, text: string): number {
  const index = source.split('\n').findIndex((line) => line.includes(text));
  assert.ok(index >= 0, `fixture has no line containing ${text}`);
  return index + 1;
}

function templateError(run: () => unknown): TemplateError {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof TemplateError, `expected a TemplateError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a TemplateError, but nothing was thrown');
}

/** A minimal valid template with `actionLines` as the body of its single action. */
function withAction(actionLines: readonly string[]): string {
  return [
    'version: "0.1"',
    'name: t',
    'global_timeout: 60',
    'tasks:',
    '  - name: only',
    '    actions:',
    '      - name: a',
    ...actionLines.map((line) => `        ${line}`),
  ].join('\n');
}

describe('renderTemplate', () => {
  it('renders a Tinkerbell template into a fully resolved spec', () => {
    const spec = renderTemplate(tinkerbellTemplate, context());
    assert.deepEqual(spec, {
      version: '0.1',
      name: 'ubuntu-install',
      globalTimeoutS: 1800,
      tasks: [
        {
          name: 'os-installation',
          worker: 'node-17',
          env: { MIRROR_HOST: '10.0.0.1', SHARED: 'task' },
          volumes: ['/dev:/dev'],
          actions: [
            {
              name: 'stream-image',
              image: 'quay.io/tinkerbell-actions/image2disk:v1.0.0',
              command: [],
              args: [],
              env: {
                MIRROR_HOST: '10.0.0.1',
                SHARED: 'action',
                IMG_URL: 'http://10.0.0.1:8080/node-17.raw.gz',
                COMPRESSED: 'true',
                DEST_DISK: '/dev/nvme0n1',
              },
              volumes: ['/dev:/dev'],
              timeoutS: 900,
              retries: 0,
              builtin: 'image2disk',
            },
            {
              name: 'wipe',
              command: ['wipefs', '-a', '/dev/nvme0n1'],
              args: ['--force', '3'],
              env: { MIRROR_HOST: '10.0.0.1', SHARED: 'task' },
              volumes: ['/dev:/dev', '/tmp:/tmp'],
              timeoutS: 600,
              retries: 2,
            },
          ],
        },
      ],
    });
  });

  it('accepts {{.x}}, {{ .x }} and plain Handlebars {{x}} alike', () => {
    const source = withAction([
      'command: ["echo", "{{.device_1}}", "{{ .device_1 }}", "{{device_1}}", "{{~ .device_1 ~}}"]',
    ]);
    const spec = renderTemplate(source, context({ device_1: 'm1' }));
    assert.deepEqual(spec.tasks[0]?.actions[0]?.command, ['echo', 'm1', 'm1', 'm1', 'm1']);
  });

  it('exposes hardware fields, interfaces, metadata and the workflow id', () => {
    const source = withAction([
      'command:',
      '  - "{{ hardware.id }} {{ hardware.arch }} {{ hardware.uefi }}"',
      '  - "{{ hardware.mac }} {{ hardware.address }} {{ hardware.hostname }}"',
      '  - "{{ hardware.interfaces.[1].mac }} {{ hardware.interfaces.[0].ip.prefix }}"',
      '  - "{{ hardware.metadata.rack.row }} {{ workflow.id }}"',
      '  - "{{#each hardware.interfaces}}{{mac}};{{/each}}"',
    ]);
    const spec = renderTemplate(source, context({}));
    assert.deepEqual(spec.tasks[0]?.actions[0]?.command, [
      'node-17 x86_64 true',
      'aa:bb:cc:dd:ee:01 10.0.0.17 node17',
      'aa:bb:cc:dd:ee:02 24',
      '3 wf-1',
      'aa:bb:cc:dd:ee:01;aa:bb:cc:dd:ee:02;',
    ]);
  });

  it('exposes the inventory the machine reported, and says when it has none', () => {
    const source = withAction([
      'command:',
      '  - "{{ hardware.inventory.disks.[0].path }} {{ hardware.inventory.memory.totalBytes }}"',
      '  - "{{ hardware.inventory.system.serial }} {{ hardware.inventory.firmware }}"',
    ]);
    assert.doesNotThrow(() => validateTemplateSource(source));
    const spec = renderTemplate(source, {
      ...context({}),
      hardware: { ...hardware, inventory: exampleInventory },
    });
    assert.deepEqual(spec.tasks[0]?.actions[0]?.command, [`/dev/sda ${128 * 2 ** 30}`, 'S392884X1 uefi']);
    // Before its first report, the machine has no inventory: an error, not an empty string.
    assert.match(
      templateError(() => renderTemplate(source, context({}))).message,
      /names "disks" below a name that is not defined \(hardware.inventory is defined once/,
    );
    const printed = withAction(['command: ["echo", "{{ hardware.inventory.disks }}"]']);
    const inventoried = { ...context({}), hardware: { ...hardware, inventory: exampleInventory } };
    assert.match(
      templateError(() => renderTemplate(printed, inventoried)).message,
      /hardware\.inventory\.disks/,
    );
  });

  it('keeps the worker token out of the variables', () => {
    const source = withAction(['command: ["echo", "{{ hardware.workerTokenSha256 }}"]']);
    const error = templateError(() => renderTemplate(source, context()));
    assert.match(error.message, /unknown variable hardware\.workerTokenSha256: hardware has id, arch, /);
    assert.doesNotMatch(error.message, /: hardware has [^;]*token/i);
  });

  it('refuses, when a template is created, a variable no machine can have, naming a near one and the line', () => {
    const cases: [string, RegExp][] = [
      ['{{ hardwre.id }}', /^line 8: unknown variable hardwre\.id; did you mean hardware\.id\?$/],
      [
        '{{ hardware.hostnme }}',
        /^line 8: unknown variable hardware\.hostnme: .*did you mean hardware\.hostname\?$/,
      ],
      [
        '{{ hardware.interfaces.[0].macc }}',
        /^line 8: unknown variable hardware\.interfaces\.0\.macc: .*did you mean mac\?$/,
      ],
      ['{{ workflow.name }}', /^line 8: unknown variable workflow\.name: workflow has id$/],
      ['{{ device_1.disk }}', /^line 8: unknown variable device_1\.disk: a hardwareMap entry/],
      ['{{ hardware.id', /^line 8: the placeholder "\{\{ hardware\.id" is not closed: end it with \}\}$/],
    ];
    for (const [placeholder, message] of cases) {
      const source = withAction([`command: ["echo", "${placeholder}"]`]);
      assert.match(templateError(() => validateTemplateSource(source)).message, message, placeholder);
    }
    // Names inside {{#each}} are the item's, metadata is the operator's own, and helpers are no variables.
    for (const ok of [
      '{{#each hardware.interfaces}}{{mac}}{{/each}}',
      '{{ hardware.metadata.rack.row }}',
      '{{#if hardware.hostname}}{{hardware.hostname}}{{/if}}',
      '{{ hardware.interfaces.[1].ip.address }}',
      '{{ lookup hardware.metadata "x" }}',
      '{{.device_1}}',
    ]) {
      validateTemplateSource(withAction([`command: ["echo", ${JSON.stringify(ok)}]`]));
    }
  });

  it('refuses a missing variable, naming it and its line', () => {
    const source = tinkerbellTemplate.replace('{{.device_1}}', '{{.device_2}}');
    const error = templateError(() => renderTemplate(source, context()));
    assert.equal(error.line, lineContaining(source, 'device_2'));
    assert.match(
      error.message,
      /^line 6: template variable "device_2" is not defined; defined at the top level: Hardware, device_1, hardware, workflow$/,
    );
  });

  it('names the line inside a literal block where a missing variable is', () => {
    const source = withAction(['command: |', '  echo one', '  echo {{ missing }}']);
    const error = templateError(() => renderTemplate(source, context({})));
    assert.equal(error.line, lineContaining(source, '{{ missing }}'));
    assert.match(error.message, /template variable "missing" is not defined/);
  });

  it('renders comments not at all: braces in them mean nothing', () => {
    const source = `# {{ unclosed\n${withAction(['command: ["true"] # {{ nor this'])}`;
    assert.deepEqual(validateTemplateSource(source), { name: 't' });
    assert.deepEqual(renderTemplate(source, context({})).tasks[0]?.actions[0]?.command, ['true']);
  });

  it('refuses an absent optional hardware field instead of rendering it empty', () => {
    const bare: Hardware = {
      ...hardware,
      interfaces: [{ mac: 'aa:bb:cc:dd:ee:03', dns: [], leaseTimeS: 60 }],
    };
    const source = withAction(['command: ["echo", "{{ hardware.hostname }}"]']);
    const error = templateError(() => renderTemplate(source, { ...context(), hardware: bare }));
    assert.equal(error.line, lineContaining(source, 'hardware.hostname'));
    assert.match(error.message, /template variable "hardware\.hostname" is not defined/);
  });

  it('refuses printing a mapping or a list as a value', () => {
    const source = withAction(['command: ["echo", "{{ hardware.interfaces }}"]']);
    const error = templateError(() => renderTemplate(source, context()));
    assert.equal(
      error.message,
      `line ${lineContaining(source, 'hardware.interfaces')}: template variable "hardware.interfaces" is a list, not a single value; name one of its entries`,
    );
  });

  it('refuses a hardwareMap entry that would hide a template variable', () => {
    const error = templateError(() =>
      renderTemplate(tinkerbellTemplate, context({ hardware: 'x', device_1: 'y' })),
    );
    assert.match(error.message, /hardwareMap entry "hardware" would hide/);
  });

  it('runs a task without a worker on the workflow hardware', () => {
    const spec = renderTemplate(withAction(['command: "true"']), context({}));
    assert.equal(spec.tasks[0]?.worker, hardware.id);
  });

  it('resolves a worker given as a MAC or as a hardware id', () => {
    const byMac = renderTemplate(tinkerbellTemplate, context({ device_1: otherMac }));
    assert.equal(byMac.tasks[0]?.worker, 'node-18');
    const byUpperCaseMac = renderTemplate(tinkerbellTemplate, context({ device_1: 'AA-BB-CC-DD-EE-99' }));
    assert.equal(byUpperCaseMac.tasks[0]?.worker, 'node-18');
    const byId = renderTemplate(tinkerbellTemplate, context({ device_1: 'node-18' }));
    assert.equal(byId.tasks[0]?.worker, 'node-18');
  });

  it('refuses an unknown worker, naming the task and the line', () => {
    const error = templateError(() =>
      renderTemplate(tinkerbellTemplate, context({ device_1: 'ff:ff:ff:ff:ff:ff' })),
    );
    assert.equal(error.line, lineContaining(tinkerbellTemplate, 'worker:'));
    assert.equal(
      error.message,
      'line 6: tasks[0].worker: "ff:ff:ff:ff:ff:ff" of task "os-installation" is not a known hardware id or MAC address',
    );
  });

  it('renders a template without placeholders', () => {
    const source = withAction(['command: [/bin/echo, hello]', 'timeout: 5']);
    assert.deepEqual(validateTemplateSource(source), { name: 't' });
    const action = renderTemplate(source, context({}))?.tasks[0]?.actions[0];
    assert.deepEqual(action?.command, ['/bin/echo', 'hello']);
    assert.equal(action?.timeoutS, 5);
  });

  it('runs a string command through the shell', () => {
    const spec = renderTemplate(withAction(['command: "wipefs -a /dev/sda && sync"']), context({}));
    assert.deepEqual(spec.tasks[0]?.actions[0]?.command, ['/bin/sh', '-c', 'wipefs -a /dev/sda && sync']);
  });

  it('checks placeholder values after rendering, at their line', () => {
    const source = withAction(['command: [sleep, "1"]', 'timeout: "{{ t }}"']);
    assert.deepEqual(validateTemplateSource(source), { name: 't' });
    assert.equal(renderTemplate(source, context({ t: '30' })).tasks[0]?.actions[0]?.timeoutS, 30);
    const error = templateError(() => renderTemplate(source, context({ t: 'ten' })));
    assert.equal(
      error.message,
      `line ${lineContaining(source, 'timeout: "{{')}: tasks[0].actions[0].timeout: must be a positive integer number of seconds, got "ten"`,
    );
  });

  it('refuses a rendered spec whose merged environments outgrow the command limit', () => {
    const specWithVariables = (count: number): string =>
      [
        'version: "0.1"',
        'name: t',
        'global_timeout: 60',
        'tasks:',
        '  - name: only',
        `    environment: {${Array.from({ length: count }, (_, i) => `V${i}: "{{ big }}"`).join(', ')}}`,
        '    actions:',
        '      - {name: a, command: "true"}',
        '      - {name: b, command: "true"}',
      ].join('\n');
    // 60 KiB per variable: 12 of them are 720 KiB of text, but the spec holds them three times.
    const big = 'x'.repeat(60 * 1024);
    const error = templateError(() => renderTemplate(specWithVariables(12), context({ big })));
    assert.match(
      error.message,
      /^the rendered workflow is \d+ bytes as JSON .*; at most 983040 are allowed$/,
    );
    const fits = renderTemplate(specWithVariables(4), context({ big }));
    assert.equal(fits.tasks[0]?.actions[1]?.env['V3'], big);
  });

  it('refuses rendered text over the limit', () => {
    const source = withAction(['command: [echo, "{{ big }}"]']);
    const error = templateError(() => renderTemplate(source, context({ big: 'x'.repeat(1024 * 1024) })));
    assert.match(error.message, /the rendered template is \d+ bytes; at most 1048576 are allowed/);
  });
});

describe('rewriteGoStylePaths', () => {
  it('drops only a dot that starts a path inside a mustache', () => {
    const cases: readonly (readonly [string, string])[] = [
      ['{{.device_1}}', '{{device_1}}'],
      ['{{ .a.b }} x.y {{.c}}', '{{ a.b }} x.y {{c}}'],
      ['{{{ .raw }}}', '{{{ raw }}}'],
      ['{{#each .list}}{{.}}{{/each}}', '{{#each list}}{{.}}{{/each}}'],
      ['{{./here}} {{../up}}', '{{./here}} {{../up}}'],
      ['{{lookup .m ".key"}}', '{{lookup m ".key"}}'],
      ['{{! .comment }} {{!-- .long }} --}}', '{{! .comment }} {{!-- .long }} --}}'],
      ['\\{{.literal}}', '\\{{.literal}}'],
      ['a.b: .c', 'a.b: .c'],
    ];
    for (const [input, expected] of cases) assert.equal(rewriteGoStylePaths(input), expected, input);
  });
});

describe('validateTemplateSource', () => {
  it('returns the name of a valid template', () => {
    assert.deepEqual(validateTemplateSource(tinkerbellTemplate), { name: 'ubuntu-install' });
  });

  it('names the field path and the line of a bad timeout', () => {
    const source = tinkerbellTemplate.replace('retries: 2', 'timeout: ten');
    const error = templateError(() => validateTemplateSource(source));
    const line = lineContaining(source, 'timeout: ten');
    assert.equal(line, 24);
    assert.equal(error.line, line);
    assert.equal(
      error.message,
      'line 24: tasks[0].actions[1].timeout: must be a positive integer number of seconds, got "ten"',
    );
  });

  it('refuses unknown fields by name, suggesting the close one', () => {
    const source = tinkerbellTemplate.replace('command:', 'comand:');
    const error = templateError(() => validateTemplateSource(source));
    // Problems come in line order: the action that lost its command (line 20), then the typo.
    assert.deepEqual(error.message.split('\n'), [
      'line 21: tasks[0].actions[1]: needs "image" (a container to run), "command" (a process to run) ' +
        'or "action" (built in: image2disk, writefile, cexec, archive2disk, reboot, poweroff, kexec, qemuimg2disk, rootio, syslinux, oci2disk, grub2disk)',
      'line 22: tasks[0].actions[1].comand: unknown field (did you mean "command"?); ' +
        'allowed here: name, image, command, args, timeout, environment, volumes, retries, action, pid',
    ]);
    assert.equal(error.problems[1]?.line, lineContaining(source, 'comand:'));
  });

  it('refuses unknown fields at every level', () => {
    const source = tinkerbellTemplate
      .replace('global_timeout: 1800', 'global_timeout: 1800\nglobal_timout: 5')
      .replace('    volumes:\n      - /dev:/dev', '    volume: /dev\n    volumes:\n      - /dev:/dev');
    const error = templateError(() => validateTemplateSource(source));
    const paths = error.problems.map((problem) => [problem.line, problem.message.slice(0, 40)]);
    assert.deepEqual(
      error.problems.map((problem) => problem.line),
      [lineContaining(source, 'global_timout'), lineContaining(source, 'volume: /dev')],
      JSON.stringify(paths),
    );
    assert.match(error.message, /global_timout: unknown field \(did you mean "global_timeout"\?\)/);
    assert.match(error.message, /tasks\[0\]\.volume: unknown field \(did you mean "volumes"\?\)/);
  });

  const structuralCases: readonly {
    readonly what: string;
    readonly from: string;
    readonly to: string;
    readonly line: string;
    readonly message: RegExp;
  }[] = [
    {
      what: 'a wrong version',
      from: 'version: "0.1"',
      to: 'version: "0.2"',
      line: 'version',
      message: /version: must be "0\.1", got "0\.2"/,
    },
    {
      what: 'a bad name',
      from: 'name: ubuntu-install',
      to: 'name: "ubuntu install"',
      line: 'name: "ubuntu',
      message: /^line 2: name: must be 1-128 letters/,
    },
    {
      what: 'a placeholder name',
      from: 'name: ubuntu-install',
      to: 'name: "{{ x }}"',
      line: 'name: "{{',
      message: /placeholders are not allowed here/,
    },
    {
      what: 'a negative global timeout',
      from: 'global_timeout: 1800',
      to: 'global_timeout: -5',
      line: 'global_timeout',
      message: /global_timeout: must be a positive integer number of seconds, got -5/,
    },
    {
      what: 'a week-long timeout',
      from: 'timeout: 900',
      to: 'timeout: 999999',
      line: 'timeout: 999999',
      message: /timeout: must be at most 604800 seconds/,
    },
    {
      what: 'too many retries',
      from: 'retries: 2',
      to: 'retries: 11',
      line: 'retries: 11',
      message: /retries: must be an integer from 0 to 10, got 11/,
    },
    {
      what: 'a task without a name',
      from: '  - name: "os-installation"\n    worker',
      to: '  - worker',
      line: '  - worker',
      message: /tasks\[0\]\.name: is required: a non-empty name, got nothing/,
    },
    {
      what: 'an empty action name',
      from: 'name: "wipe"',
      to: 'name: ""',
      line: 'name: ""',
      message: /tasks\[0\]\.actions\[1\]\.name: is required/,
    },
    {
      what: 'a duplicate action name',
      from: 'name: "wipe"',
      to: 'name: "stream-image"',
      line: '- name: "stream-image"',
      message: /tasks\[0\]\.actions\[1\]\.name: "stream-image" is already the name of another action/,
    },
    {
      what: 'an environment list',
      from: '      MIRROR_HOST: 10.0.0.1\n      SHARED: task',
      to: '      - MIRROR_HOST=1',
      line: 'environment:\n      - MIRROR_HOST=1',
      message: /tasks\[0\]\.environment: environment must be a mapping, got a list/,
    },
    {
      what: 'an environment mapping value',
      from: 'COMPRESSED: true',
      to: 'COMPRESSED: {a: 1}',
      line: 'COMPRESSED',
      message: /environment\.COMPRESSED: must be a string, number or boolean, got a mapping/,
    },
    {
      what: 'a bad environment name',
      from: 'COMPRESSED: true',
      to: 'BAD-NAME: true',
      line: 'BAD-NAME',
      message: /environment\.BAD-NAME: is not a valid environment variable name/,
    },
    {
      what: 'an unquoted placeholder followed by more (one alone is read as its text)',
      from: 'worker: "{{.device_1}}"',
      to: 'worker: {{.device_1}: x}',
      line: 'worker:',
      message:
        /tasks\[0\]\.worker: must be a hardware id or MAC address, got a mapping \(a placeholder must be quoted/,
    },
    {
      what: 'an action with neither image nor command',
      from: '        image: quay.io/tinkerbell-actions/image2disk:v1.0.0\n',
      to: '',
      line: '- name: "stream-image"',
      message: /tasks\[0\]\.actions\[0\]: needs "image" \(a container to run\), "command"/,
    },
    {
      what: 'an empty command list',
      from: 'command: ["wipefs", "-a", "{{ hardware.metadata.disk }}"]',
      to: 'command: []',
      line: 'command: []',
      message: /tasks\[0\]\.actions\[1\]\.command: must not be an empty list/,
    },
    {
      what: 'args that are not a list',
      from: 'args: [--force, 3]',
      to: 'args: --force',
      line: 'args:',
      message: /tasks\[0\]\.actions\[1\]\.args: must be a list, got "--force"/,
    },
  ];
  for (const { what, from, to, line, message } of structuralCases) {
    it(`refuses ${what} at its line`, () => {
      assert.ok(tinkerbellTemplate.includes(from), `fixture lacks ${from}`);
      const source = tinkerbellTemplate.replace(from, to);
      const error = templateError(() => validateTemplateSource(source));
      // The last occurrence: a duplicate is reported where it repeats.
      const expectedLine = source.slice(0, source.lastIndexOf(line)).split('\n').length;
      assert.equal(error.line, expectedLine, error.message);
      assert.match(error.message, message);
    });
  }

  it('refuses a template that has no tasks, or a task with no actions', () => {
    const noTasks = 'version: "0.1"\nname: t\nglobal_timeout: 60\ntasks: []\n';
    assert.equal(
      templateError(() => validateTemplateSource(noTasks)).message,
      'line 4: tasks: must be a list of at least one task, got a list',
    );
    const noActions = 'version: "0.1"\nname: t\nglobal_timeout: 60\ntasks:\n  - name: x\n    actions: []\n';
    assert.equal(
      templateError(() => validateTemplateSource(noActions)).message,
      'line 6: tasks[0].actions: must be a list of at least one action, got a list',
    );
  });

  it('points a missing required field at the mapping that lacks it', () => {
    const source =
      'version: "0.1"\nname: t\ntasks:\n  - name: x\n    actions: [{name: a, command: "true"}]\n';
    const error = templateError(() => validateTemplateSource(source));
    assert.equal(
      error.message,
      'line 1: global_timeout: must be a positive integer number of seconds, got nothing',
    );
  });

  it('refuses duplicate task names', () => {
    const task = ['  - name: same', '    actions:', '      - name: a', '        command: "true"'];
    const source = ['version: "0.1"', 'name: t', 'global_timeout: 60', 'tasks:', ...task, ...task].join('\n');
    const error = templateError(() => validateTemplateSource(source));
    assert.equal(error.message, 'line 9: tasks[1].name: "same" is already the name of another task (#0)');
  });

  it('reports YAML syntax errors and duplicate keys with their line', () => {
    const broken = templateError(() => validateTemplateSource(withAction(['command: [echo', 'timeout: 5'])));
    assert.match(broken.message, /^line \d+: YAML syntax: /);
    assert.ok(broken.line !== undefined && broken.line >= 8, broken.message);
    const duplicate = templateError(() =>
      validateTemplateSource(withAction(['command: "a"', 'command: "b"'])),
    );
    assert.equal(duplicate.message, 'line 9: YAML syntax: Map keys must be unique');
  });

  it('reports placeholder syntax errors with their line', () => {
    const unclosed = templateError(() => validateTemplateSource(withAction(['command: "{{#if x}}yes"'])));
    assert.equal(unclosed.line, 8);
    assert.match(unclosed.message, /^line 8: placeholder syntax error near /);
    const goPrintf = templateError(() =>
      validateTemplateSource(withAction(['command: "{{ printf \\"%s\\" .Hardware.Disks }}"'])),
    );
    assert.match(
      goPrintf.message,
      /^line 8: "\{\{ printf .*" is a Go template form Slipway does not render: printf/,
    );
  });

  it('refuses partials and reserved names', () => {
    const partial = templateError(() => validateTemplateSource(withAction(['command: "{{> other }}"'])));
    assert.equal(partial.message, 'line 8: partials ({{> name}}) are not supported');
    const reserved = templateError(() =>
      validateTemplateSource(withAction(['command: "{{ constructor }}"'])),
    );
    assert.equal(reserved.message, 'line 8: placeholder name "constructor" is reserved');
  });

  it('refuses a document that is not a mapping, or several documents', () => {
    assert.equal(
      templateError(() => validateTemplateSource('- a\n- b\n')).message,
      'line 1: the template must be a mapping, got a list',
    );
    const several = templateError(() => validateTemplateSource(`${tinkerbellTemplate}\n---\nname: x\n`));
    assert.match(several.message, /YAML syntax: Source contains multiple documents/);
  });

  it('refuses a source over the size limit', () => {
    const padding = `# ${'x'.repeat(templateSourceBytesMax)}\n`;
    const error = templateError(() => validateTemplateSource(padding + tinkerbellTemplate));
    assert.match(error.message, /^the template is \d+ bytes; at most 262144 are allowed$/);
  });

  it('refuses more tasks than the limit', () => {
    const tasks = Array.from(
      { length: tasksMax + 1 },
      (_, i) => `  - {name: t${i}, actions: [{name: a, command: "true"}]}`,
    );
    const source = ['version: "0.1"', 'name: t', 'global_timeout: 60', 'tasks:', ...tasks].join('\n');
    const error = templateError(() => validateTemplateSource(source));
    assert.equal(error.message, `line 4: tasks: has ${tasksMax + 1} tasks; at most ${tasksMax} are allowed`);
    const fewer = ['version: "0.1"', 'name: t', 'global_timeout: 60', 'tasks:', ...tasks.slice(1)].join('\n');
    assert.deepEqual(validateTemplateSource(fewer), { name: 't' });
  });

  it('refuses more actions in all than the limit', () => {
    const perTask = actionsMax / 4;
    const actions = Array.from({ length: perTask }, (_, i) => `{name: a${i}, command: "true"}`).join(', ');
    const task = (i: number, extra: string): string => `  - {name: t${i}, actions: [${actions}${extra}]}`;
    const head = ['version: "0.1"', 'name: t', 'global_timeout: 60', 'tasks:'];
    const atLimit = [...head, task(0, ''), task(1, ''), task(2, ''), task(3, '')].join('\n');
    assert.deepEqual(validateTemplateSource(atLimit), { name: 't' });
    const over = [
      ...head,
      task(0, ''),
      task(1, ''),
      task(2, ''),
      task(3, ', {name: extra, command: "true"}'),
    ].join('\n');
    const error = templateError(() => validateTemplateSource(over));
    assert.equal(
      error.message,
      `line 4: tasks: has ${actionsMax + 1} actions in all; at most ${actionsMax} are allowed`,
    );
  });
});

describe('built-in actions', () => {
  /** A Tinkerbell template as its users write it, hub images and all; not one word changed. */
  const hubTemplate = [
    'version: "0.1"',
    'name: debian-install',
    'global_timeout: 3600',
    'tasks:',
    '  - name: "os installation"',
    '    worker: "{{.device_1}}"',
    '    volumes:',
    '      - /dev:/dev',
    '      - /dev/console:/dev/console',
    '    actions:',
    '      - name: "stream debian image"',
    '        image: quay.io/tinkerbell/actions/image2disk:latest',
    '        timeout: 600',
    '        environment:',
    '          DEST_DISK: /dev/nvme0n1',
    '          IMG_URL: "http://10.1.1.11:8080/debian-12.raw.gz"',
    '          COMPRESSED: true',
    '      - name: "write netplan"',
    '        image: quay.io/tinkerbell-actions/writefile:v1.0.0',
    '        timeout: 90',
    '        environment:',
    '          DEST_DISK: /dev/nvme0n1p2',
    '          FS_TYPE: ext4',
    '          DEST_PATH: /etc/netplan/config.yaml',
    '          CONTENTS: |',
    '            network:',
    '              version: 2',
    '          UID: 0',
    '          GID: 0',
    '          MODE: 0644',
    '          DIRMODE: 0755',
    '      - name: "kexec debian"',
    '        image: quay.io/tinkerbell/actions/kexec@sha256:' + 'ab12'.repeat(16),
    '        timeout: 90',
    '        pid: host',
    '        environment:',
    '          BLOCK_DEVICE: /dev/nvme0n1p2',
    '          FS_TYPE: ext4',
    '          KERNEL_PATH: /boot/vmlinuz',
    '          INITRD_PATH: /boot/initrd.img',
    '          CMD_LINE: "root=/dev/nvme0n1p2 ro"',
    '      - name: "reboot"',
    '        image: quay.io/tinkerbell/actions/reboot:v1.0.0',
    '        timeout: 90',
  ].join('\n');

  it('maps Tinkerbell hub images, by their last path segment, to the built-ins', () => {
    const spec = renderTemplate(hubTemplate, context());
    const actions = spec.tasks[0]?.actions ?? [];
    assert.deepEqual(
      actions.map((action) => [action.builtin, action.image?.split('/')[0]]),
      [
        ['image2disk', 'quay.io'],
        ['writefile', 'quay.io'],
        ['kexec', 'quay.io'],
        ['reboot', 'quay.io'],
      ],
    );
    assert.equal(actions[1]?.env['CONTENTS'], 'network:\n  version: 2\n');
    assert.equal(actions[1]?.env['MODE'], '644');
  });

  it('leaves other images and look-alikes alone', () => {
    for (const image of [
      'quay.io/tinkerbell/actions/slurp:latest',
      'quay.io/tinkerbell/actions/extra/image2disk:latest',
      'quay.io/example/image2disk:latest',
      'docker.io/tinkerbell/actions/image2disk',
      'quay.io/tinkerbell/actions/image2disk-fork:v1',
    ]) {
      const spec = renderTemplate(withAction([`image: ${image}`]), context());
      assert.equal(spec.tasks[0]?.actions[0]?.builtin, undefined, image);
    }
    const spec = renderTemplate(withAction(['image: quay.io/tinkerbell-actions/reboot']), context());
    assert.equal(spec.tasks[0]?.actions[0]?.builtin, 'reboot');
  });

  it('runs `action:` with neither image nor command, keeping the environment as the settings', () => {
    const source = withAction([
      'action: image2disk',
      'environment:',
      '  IMG_URL: http://10.0.0.1/disk.raw',
      '  DEST_DISK: "{{ hardware.metadata.disk }}"',
    ]);
    assert.deepEqual(validateTemplateSource(source), { name: 't' });
    const action = renderTemplate(source, context()).tasks[0]?.actions[0];
    assert.equal(action?.builtin, 'image2disk');
    assert.equal(action?.image, undefined);
    assert.deepEqual(action?.command, []);
    assert.deepEqual(action?.env, { IMG_URL: 'http://10.0.0.1/disk.raw', DEST_DISK: '/dev/nvme0n1' });
    const reboot = renderTemplate(withAction(['action: reboot']), context()).tasks[0]?.actions[0];
    assert.equal(reboot?.builtin, 'reboot');
  });

  it('refuses an unknown built-in, naming the allowed ones', () => {
    const source = withAction(['action: image2dsk']);
    const error = templateError(() => validateTemplateSource(source));
    assert.equal(
      error.message,
      `line ${lineContaining(source, 'image2dsk')}: tasks[0].actions[0].action: must name a built-in action, ` +
        'one of image2disk, writefile, cexec, archive2disk, reboot, poweroff, kexec, qemuimg2disk, rootio, syslinux, oci2disk, grub2disk; got "image2dsk" (did you mean "image2disk"?)',
    );
  });

  it('refuses image, command or args beside `action:`', () => {
    const source = withAction(['action: reboot', 'command: [reboot, -f]', 'image: busybox']);
    const error = templateError(() => validateTemplateSource(source));
    assert.deepEqual(
      error.problems.map((problem) => problem.path.at(-1)),
      ['command', 'image'],
    );
    assert.match(error.message, /is not used by a built-in action/);
  });

  it('refuses, once rendered, a built-in missing a required setting from both environments', () => {
    const source = withAction(['action: writefile', 'environment:', '  DEST_DISK: /dev/sda1']);
    // Before rendering the settings may still come from elsewhere: only rendering decides.
    assert.deepEqual(validateTemplateSource(source), { name: 't' });
    const error = templateError(() => renderTemplate(source, context()));
    assert.match(
      error.message,
      /tasks\[0\]\.actions\[0\]\.environment: writefile needs FS_TYPE, DEST_PATH in the action's or the task's environment/,
    );
    const fromTask = source.replace(
      '  - name: only\n',
      '  - name: only\n    environment:\n      FS_TYPE: ext4\n      DEST_PATH: /etc/motd\n',
    );
    assert.equal(renderTemplate(fromTask, context()).tasks[0]?.actions[0]?.builtin, 'writefile');
  });

  it("takes kexec as Tinkerbell's hub docs write it: BLOCK_DEVICE and FS_TYPE, the rest from grub.cfg", () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/kexec:latest',
      'environment:',
      '  BLOCK_DEVICE: /dev/sda1',
      '  FS_TYPE: ext4',
    ]);
    const action = renderTemplate(source, context()).tasks[0]?.actions[0];
    assert.equal(action?.builtin, 'kexec');
    assert.deepEqual(action?.env, { BLOCK_DEVICE: '/dev/sda1', FS_TYPE: 'ext4' });
    const noDevice = withAction(['action: kexec', 'environment:', '  FS_TYPE: ext4']);
    assert.match(
      templateError(() => renderTemplate(noDevice, context())).message,
      /kexec needs BLOCK_DEVICE/,
    );
  });

  it('refuses, before and after rendering, a setting the agent would refuse, naming the allowed values', () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/cexec:latest',
      'environment:',
      '  BLOCK_DEVICE: /dev/sda1',
      '  FS_TYPE: ext5',
      '  CHROOT: yes',
      '  CMD_LINE: update-initramfs -u',
    ]);
    const error = templateError(() => validateTemplateSource(source));
    assert.deepEqual(
      error.problems.map((problem) => problem.message),
      [
        'cexec: FS_TYPE=ext5 is not one of ext4, ext3, ext2, xfs, btrfs, vfat, msdos, exfat, f2fs, ntfs3',
        'cexec: CHROOT=yes is not one of y',
      ],
    );
    const kexec = withAction([
      'action: kexec',
      'environment:',
      '  BLOCK_DEVICE: /dev/sda1',
      '  FS_TYPE: zfs',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(kexec)).message,
      /kexec: FS_TYPE=zfs is not one of ext4/,
    );
    // A placeholder is checked once rendered: hardware.metadata.disk renders to a device, not a filesystem.
    const rendered = withAction([
      'action: writefile',
      'environment:',
      '  DEST_DISK: /dev/sda1',
      '  FS_TYPE: "{{ hardware.metadata.disk }}"',
      '  DEST_PATH: /etc/motd',
    ]);
    assert.deepEqual(validateTemplateSource(rendered), { name: 't' });
    assert.match(
      templateError(() => renderTemplate(rendered, context())).message,
      /writefile: FS_TYPE=\/dev\/nvme0n1 is not one of ext4/,
    );
    const archive = withAction([
      'image: quay.io/tinkerbell/actions/archive2disk:latest',
      'environment:',
      '  ARCHIVE_URL: http://10.0.0.1/root.tar.xz',
      '  ARCHIVE_TYPE: tarxz',
      '  DEST_DISK: /dev/sda2',
      '  FS_TYPE: ext4',
      '  DEST_PATH: /',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(archive)).message,
      /environment: archive2disk: ARCHIVE_TYPE=tarxz is not one of tar, targz, tarzst$/,
    );
    const unpacked = renderTemplate(archive.replace('tarxz', 'targz'), context()).tasks[0]?.actions[0];
    assert.equal(unpacked?.builtin, 'archive2disk');
    const good = source.replace('ext5', 'ext4').replace('CHROOT: yes', 'CHROOT: y');
    assert.equal(renderTemplate(good, context()).tasks[0]?.actions[0]?.builtin, 'cexec');
  });

  it("rootio: the hub image's command is checked, and the layout comes from the hardware's metadata", () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/rootio:latest',
      'command: ["format"]',
      'environment:',
      '  MIRROR_HOST: 10.0.0.1',
    ]);
    const storage = {
      disks: [{ device: '/dev/sda', wipe_table: true, partitions: [{ label: 'ROOT', number: 1, size: 0 }] }],
      filesystems: [
        { mount: { device: '/dev/sda1', format: 'ext4', point: '/', create: { options: ['-L', 'ROOT'] } } },
      ],
    };
    const withStorage = (value: unknown): RenderContext => ({
      ...context(),
      hardware: { ...hardware, metadata: { instance: { storage: value as JsonValue } } },
    });
    const action = renderTemplate(source, withStorage(storage)).tasks[0]?.actions[0];
    assert.equal(action?.builtin, 'rootio');
    assert.deepEqual(action?.command, ['format']);
    assert.deepEqual(JSON.parse(action?.env['ROOTIO_STORAGE'] ?? ''), storage);
    // Refused at template create: a command rootio has not, an ACTION it has not, a bad MBR.
    for (const [lines, message] of [
      [
        ['command: ["explode"]'],
        /command: rootio: command explode is not one of partition, format, mount, wipe$/,
      ],
      [
        ['environment:', '  ACTION: explode'],
        /environment: rootio: ACTION=explode is not one of partition, format, mount, wipe$/,
      ],
      [
        ['environment:', '  ACTION: mount', '  MBR: yes'],
        /environment: rootio: MBR=yes is not one of true, false$/,
      ],
      [
        ['environment:', '  MBR: "true"'],
        /command: rootio: needs what to do: command \["partition"\] or ACTION/,
      ],
      [
        ['command: ["partition"]', 'environment:', '  ACTION: format'],
        /command: rootio: command partition and ACTION=format disagree; give one$/,
      ],
    ] as const) {
      const template = withAction(['image: quay.io/tinkerbell/actions/rootio:latest', ...lines]);
      assert.match(templateError(() => validateTemplateSource(template)).message, message);
    }
    // Refused when the workflow is created: no layout in the metadata, or one the machine would fail on.
    assert.match(
      templateError(() => renderTemplate(source, context())).message,
      /rootio reads the disk layout from hardware node-17 metadata\.instance\.storage \(Tinkerbell's disks and filesystems\), which it does not have; add it to the hardware or give ROOTIO_STORAGE/,
    );
    const zfs = { filesystems: [{ mount: { device: '/dev/sda1', format: 'zfs', point: '/' } }] };
    assert.match(
      templateError(() => renderTemplate(source, withStorage(zfs))).message,
      /rootio: hardware node-17 metadata\.instance\.storage\.filesystems\[0\]\.mount\.format is "zfs", not one of ext4, ext3, ext2, vfat, xfs, swap/,
    );
    const gap = { disks: [{ device: '/dev/sda', partitions: [{ label: 'A', number: 2, size: 10 }] }] };
    assert.match(
      templateError(() => renderTemplate(source, withStorage(gap))).message,
      /disks\[0\]\.partitions\[0\]\.number is 2; partitions are numbered 1, 2, \.\.\. in order/,
    );
    // A layout given in the template wins, and is checked at template create.
    const given = withAction([
      'action: rootio',
      'environment:',
      '  ACTION: partition',
      `  ROOTIO_STORAGE: '${JSON.stringify({ disks: [{ device: 'sda' }] })}'`,
    ]);
    assert.match(
      templateError(() => validateTemplateSource(given)).message,
      /rootio: ROOTIO_STORAGE\.disks\[0\]\.device is "sda", not a device path such as \/dev\/sda/,
    );
    const explicit = given.replace('"sda"', '"/dev/sdb"');
    assert.equal(
      renderTemplate(explicit, context()).tasks[0]?.actions[0]?.env['ROOTIO_STORAGE'],
      JSON.stringify({ disks: [{ device: '/dev/sdb' }] }),
    );
  });

  it('syslinux: the hub image is the built-in, SYSLINUX_VERSION is checked and required', () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/syslinux:latest',
      'environment:',
      '  DEST_DISK: /dev/sdb',
      '  DEST_PARTITION: /dev/sdb1',
      '  SYSLINUX_VERSION: 4.07',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(source)).message,
      /environment: syslinux: SYSLINUX_VERSION=4\.07 is not one of 3\.86, 386, 6\.04$/,
    );
    assert.equal(
      renderTemplate(source.replace('4.07', '3.86'), context()).tasks[0]?.actions[0]?.builtin,
      'syslinux',
    );
    const noVersion = source.replace('  SYSLINUX_VERSION: 4.07', '  MIRROR_HOST: 10.0.0.1');
    assert.match(
      templateError(() => renderTemplate(noVersion, context())).message,
      /syslinux needs SYSLINUX_VERSION in the action's or the task's environment/,
    );
  });

  it('oci2disk: the hub image is the built-in, COMPRESSED and SKIP_VERIFY are checked', () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/oci2disk:latest',
      'environment:',
      '  IMG_URL: 192.168.0.173/test/debian:raw.gz',
      '  DEST_DISK: /dev/nvme0n1',
      '  COMPRESSED: true',
      '  SKIP_VERIFY: yes',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(source)).message,
      /environment: oci2disk: SKIP_VERIFY=yes is not one of true, false$/,
    );
    const good = source.replace('SKIP_VERIFY: yes', 'SKIP_VERIFY: "true"');
    assert.equal(renderTemplate(good, context()).tasks[0]?.actions[0]?.builtin, 'oci2disk');
  });

  it('grub2disk: the hub image is the built-in, FS_TYPE is checked and its settings required', () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/grub2disk:latest',
      'environment:',
      '  GRUB_INSTALL_PATH: /dev/sda',
      '  GRUB_DISK: /dev/sda1',
      '  FS_TYPE: etx4',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(source)).message,
      /environment: grub2disk: FS_TYPE=etx4 is not one of ext4, /,
    );
    assert.equal(
      renderTemplate(source.replace('etx4', 'ext4'), context()).tasks[0]?.actions[0]?.builtin,
      'grub2disk',
    );
    const noDisk = source
      .replace('etx4', 'ext4')
      .split('\n')
      .filter((line) => !line.includes('GRUB_DISK'))
      .join('\n');
    assert.match(
      templateError(() => renderTemplate(noDisk, context())).message,
      /grub2disk needs GRUB_DISK in the action's or the task's environment/,
    );
  });

  it('qemuimg2disk: the hub image is the built-in, FORMAT is checked and IMG_URL and DEST_DISK are required', () => {
    const source = withAction([
      'image: quay.io/tinkerbell/actions/qemuimg2disk:latest',
      'environment:',
      '  IMG_URL: http://10.0.0.1/focal.qcow2',
      '  DEST_DISK: /dev/sda',
      '  FORMAT: qcow2',
    ]);
    assert.match(
      templateError(() => validateTemplateSource(source)).message,
      /environment: qemuimg2disk: FORMAT=qcow2 is not one of host_device, raw$/,
    );
    const good = source.replace('  FORMAT: qcow2', '  EXTRA_ARGS: -W');
    assert.equal(renderTemplate(good, context()).tasks[0]?.actions[0]?.builtin, 'qemuimg2disk');
    const noDisk = withAction(['action: qemuimg2disk', 'environment:', '  IMG_URL: http://10.0.0.1/a.qcow2']);
    assert.match(
      templateError(() => renderTemplate(noDisk, context())).message,
      /qemuimg2disk needs DEST_DISK in the action's or the task's environment/,
    );
  });
});
