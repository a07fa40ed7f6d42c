// Goal: prove that placeholder values are data. Whatever a variable holds (quotes of both kinds,
// newlines, YAML syntax, `{{`, shell syntax, NUL, very long strings), rendering leaves the
// template's tasks, actions, names and every command's argument vector exactly as the template
// wrote them, and each value arrives exactly as given: as an argument, as an environment value,
// or, for a shell command line, in the environment that the unchanged script refers to.
// Method: fast-check generates hostile values for one fixed template that uses every place a
// placeholder can go (list command, args, environment, a shell string in several quoting
// contexts, built-in actions, an alias, the worker); the rendered spec must equal a spec the
// test builds by hand from the values. The shell scripts run under a real /bin/sh and must print
// the values verbatim. Deterministic cases pin the refusals: NUL, limits, keys, blocks.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import type { ActionSpec, Hardware, RenderedTemplate } from '../../src/model/records.js';
import { normalizeMac } from '../../src/platform/addresses.js';
import {
  renderTemplate,
  TemplateError,
  validateTemplateSource,
  type RenderContext,
} from '../../src/workflow/template.js';
import { fieldBytesMax } from '../../src/workflow/template-limits.js';

const hardware: Hardware = {
  id: 'node-1',
  interfaces: [{ mac: 'aa:bb:cc:dd:ee:01', dns: [], leaseTimeS: 3600 }],
  arch: 'x86_64',
  uefi: true,
  netboot: { allowPXE: true, allowWorkflow: true },
  metadata: {},
  workerTokenSha256: 'a'.repeat(64),
  createdMs: 1,
  updatedMs: 1,
  version: 1,
};

function context(hardwareMap: Record<string, string>): RenderContext {
  const workers = new Map([
    ['node-1', 'node-1'],
    ['aa:bb:cc:dd:ee:01', 'node-1'],
  ]);
  return { workflowId: 'wf-1', hardware, hardwareMap, resolveWorker: (value) => workers.get(value) };
}

const template = [
  'version: "0.1"',
  'name: injection',
  'global_timeout: 600',
  'tasks:',
  '  - name: provision',
  '    worker: "{{ .device_1 }}"',
  '    environment:',
  '      TASK_VALUE: "{{ v0 }}"',
  '    actions:',
  '      - name: argv',
  '        command: ["printf", "%s", "{{ v1 }}"]',
  '        args: ["{{ .v2 }}", "--", "plain {{ v3 }} text"]',
  '        environment:',
  "          VALUE: '{{ v4 }}'",
  '          MIXED: prefix-{{ v5 }}-suffix',
  '      - name: shell',
  `        command: "printf '%s' {{ v1 }}"`,
  '      - name: shell-quoting',
  '        command: |',
  `          printf '%s|' {{ v1 }} "{{ v2 }}" 'at {{ v3 }}' # {{ v0 }} isn't used`,
  '          cat <<EOF',
  '          {{ v4 }}',
  '          EOF',
  '        timeout: 60',
  '      - name: motd',
  '        action: writefile',
  '        environment:',
  '          DEST_DISK: /dev/sda1',
  '          FS_TYPE: ext4',
  '          DEST_PATH: /etc/motd',
  '          CONTENTS: "{{ v5 }}"',
  '  - name: second',
  '    worker: "{{ hardware.id }}"',
  '    environment: &shared',
  '      SHARED: "{{ v2 }}"',
  '    actions:',
  '      - name: image',
  '        image: quay.io/tinkerbell/actions/image2disk:v1.0.0',
  '        environment:',
  '          IMG_URL: "http://10.0.0.1/{{ v0 }}.raw"',
  '          DEST_DISK: /dev/sda',
  '      - name: again',
  '        command: ["true"]',
  '        environment: *shared',
].join('\n');

/** The shell-quoting action's script: the template's text, each placeholder a reference. */
const quotingScript = [
  `printf '%s|' "\${SLIPWAY_VALUE_1}" "\${SLIPWAY_VALUE_2}" 'at '"\${SLIPWAY_VALUE_3}"'' #  isn't used`,
  'cat <<EOF',
  '${SLIPWAY_VALUE_4}',
  'EOF',
  '',
].join('\n');

type Values = readonly [string, string, string, string, string, string];

function hardwareMap(values: Values): Record<string, string> {
  const map: Record<string, string> = { device_1: 'aa:bb:cc:dd:ee:01' };
  values.forEach((value, index) => (map[`v${index}`] = value));
  return map;
}

function action(name: string, fields: Partial<ActionSpec>): ActionSpec {
  return { name, command: [], args: [], env: {}, volumes: [], timeoutS: 600, retries: 0, ...fields };
}

/** The spec the template must render to, written out from the values by hand. */
function expectedSpec([v0, v1, v2, v3, v4, v5]: Values): RenderedTemplate {
  const taskEnv = { TASK_VALUE: v0 };
  const shared = { SHARED: v2 };
  return {
    version: '0.1',
    name: 'injection',
    globalTimeoutS: 600,
    tasks: [
      {
        name: 'provision',
        worker: 'node-1',
        env: taskEnv,
        volumes: [],
        actions: [
          action('argv', {
            command: ['printf', '%s', v1],
            args: [v2, '--', `plain ${v3} text`],
            env: { ...taskEnv, VALUE: v4, MIXED: `prefix-${v5}-suffix` },
          }),
          action('shell', {
            command: ['/bin/sh', '-c', `printf '%s' "\${SLIPWAY_VALUE_1}"`],
            env: { ...taskEnv, SLIPWAY_VALUE_1: v1 },
          }),
          action('shell-quoting', {
            command: ['/bin/sh', '-c', quotingScript],
            env: {
              ...taskEnv,
              SLIPWAY_VALUE_1: v1,
              SLIPWAY_VALUE_2: v2,
              SLIPWAY_VALUE_3: v3,
              SLIPWAY_VALUE_4: v4,
            },
            timeoutS: 60,
          }),
          action('motd', {
            env: {
              ...taskEnv,
              DEST_DISK: '/dev/sda1',
              FS_TYPE: 'ext4',
              DEST_PATH: '/etc/motd',
              CONTENTS: v5,
            },
            builtin: 'writefile',
          }),
        ],
      },
      {
        name: 'second',
        worker: 'node-1',
        env: shared,
        volumes: [],
        actions: [
          action('image', {
            image: 'quay.io/tinkerbell/actions/image2disk:v1.0.0',
            env: { ...shared, IMG_URL: `http://10.0.0.1/${v0}.raw`, DEST_DISK: '/dev/sda' },
            builtin: 'image2disk',
          }),
          action('again', { command: ['true'], env: shared }),
        ],
      },
    ],
  };
}

/** Runs an action's argv as the worker would, with only its environment (and PATH). */
function run(spec: ActionSpec): Buffer {
  const [program = '', ...leading] = spec.command;
  const result = spawnSync(program, [...leading, ...spec.args], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...spec.env },
  });
  assert.equal(result.status, 0, result.stderr.toString());
  return result.stdout;
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

/** Pieces of YAML, shell and Handlebars syntax, and text that has broken template renderers. */
const hostilePieces = [
  '"',
  "'",
  '\n',
  '\r\n',
  '\t',
  ': ',
  '- ',
  '#',
  ' # comment',
  '{{',
  '}}',
  '{{ v1 }}',
  '{{.device_1}}',
  '\\',
  '\\n',
  '\u0000',
  '&anchor ',
  '*anchor',
  '!!str ',
  '!tag ',
  '<<: *anchor',
  '---\n',
  '...',
  '|',
  '>-',
  '%YAML 1.2',
  '@',
  '[',
  ']',
  '{',
  '}',
  ',',
  '? ',
  '$(reboot)',
  '`reboot`',
  '${HOME}',
  '$SLIPWAY_VALUE_1',
  '; reboot',
  '&& reboot',
  "'; reboot; echo '",
  '"; reboot; echo "',
  '\nEOF\n',
  'EOF',
  '*',
  '~',
  'é',
  '🙂',
  '\u2028',
  ' ',
  'x"]\n      - name: injected\n        command: ["reboot", "',
];

const shortHostile = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.array(fc.constantFrom(...hostilePieces), { maxLength: 10 }).map((p) => p.join('')),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
);

/**
 * Close to the per-field limit (leaving room for the text some fields add around the value), in
 * UTF-8 bytes: a hostile piece repeated.
 */
const longHostile = fc
  .tuple(
    fc.array(fc.constantFrom(...hostilePieces.filter((piece) => !piece.includes('\u0000'))), {
      minLength: 1,
      maxLength: 4,
    }),
    fc.integer({ min: fieldBytesMax - 2048, max: fieldBytesMax - 64 }),
  )
  .map(([pieces, bytes]) => {
    const unit = pieces.join('') || 'x';
    return unit.repeat(Math.floor(bytes / Buffer.byteLength(unit)));
  });

/** Six values, at most one of them long (two would outgrow the rendered workflow's limit). */
const hostileValues: fc.Arbitrary<Values> = fc
  .tuple(
    fc.tuple(shortHostile, shortHostile, shortHostile, shortHostile, shortHostile, shortHostile),
    fc.option(fc.tuple(fc.integer({ min: 0, max: 5 }), longHostile), { freq: 8 }),
  )
  .map(([values, long]) => {
    const copy = [...values] as [string, string, string, string, string, string];
    if (long !== null) copy[long[0]] = long[1];
    return copy;
  });

describe('placeholder values are data', () => {
  it('leaves every task, action and argument vector as written, whatever the values', () => {
    assert.deepEqual(validateTemplateSource(template), { name: 'injection' });
    fc.assert(
      fc.property(hostileValues, (values) => {
        if (values.some((value) => value.includes('\u0000'))) {
          // execve takes C strings: refused when rendered, never cut short on the machine.
          const error = templateError(() => renderTemplate(template, context(hardwareMap(values))));
          assert.match(error.message, /NUL character/);
          return;
        }
        const spec = renderTemplate(template, context(hardwareMap(values)));
        assert.deepEqual(spec, expectedSpec(values));
      }),
      { numRuns: 200 },
    );
  });

  it('hands shell command lines their values verbatim through the environment', () => {
    const noNul = hostileValues.filter((values) => values.every((value) => !value.includes('\u0000')));
    fc.assert(
      fc.property(noNul, (values) => {
        const [, v1, v2, v3, v4] = values;
        const actions = renderTemplate(template, context(hardwareMap(values))).tasks[0]?.actions ?? [];
        const [argv, shell, quoting] = actions;
        assert.ok(argv !== undefined && shell !== undefined && quoting !== undefined);
        // printf repeats its format for every argument: the args follow the command's.
        assert.deepEqual(run(argv), Buffer.from(`${v1}${v2}--plain ${v3} text`));
        assert.deepEqual(run(shell), Buffer.from(v1));
        assert.deepEqual(run(quoting), Buffer.from(`${v1}|${v2}|at ${v3}|${v4}\n`));
      }),
      { numRuns: 30 },
    );
  });

  it('keeps a quote-and-newlines value from adding an action (it did when text was rendered)', () => {
    const source = [
      'version: "0.1"',
      'name: t',
      'global_timeout: 60',
      'tasks:',
      '  - name: only',
      '    actions:',
      '      - name: greet',
      '        command: ["echo", "{{ note }}"]',
    ].join('\n');
    const note = 'hi"]\n      - name: injected\n        command: ["reboot", "';
    const spec = renderTemplate(source, context({ note }));
    assert.deepEqual(
      spec.tasks.map((task) => task.actions.map((a) => [a.name, a.command])),
      [[['greet', ['echo', note]]]],
    );
  });

  it('passes the worker value to the resolver exactly, and only the resolver decides', () => {
    const source = template.replace('worker: "{{ .device_1 }}"', 'worker: "{{ w }}"');
    fc.assert(
      fc.property(shortHostile, (w) => {
        const asked: string[] = [];
        const ctx = {
          ...context({ ...hardwareMap(['a', 'b', 'c', 'd', 'e', 'f']), w }),
          resolveWorker: (value: string) => (asked.push(value), 'node-9'),
        };
        if (w === '') {
          assert.match(templateError(() => renderTemplate(source, ctx)).message, /worker: must be/);
          return;
        }
        const spec = renderTemplate(source, ctx);
        assert.deepEqual(asked, [normalizeMac(w) ?? w, 'node-1']);
        assert.deepEqual(
          spec.tasks.map((task) => task.worker),
          ['node-9', 'node-9'],
        );
      }),
      { numRuns: 100 },
    );
  });
});

/** A template whose single action is `actionLines`. */
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

describe('refusals around placeholder values', () => {
  it('refuses a value past the field limit, in an argument, an environment value or a shell command', () => {
    const big = 'x'.repeat(fieldBytesMax + 1);
    const inArgs = templateError(() =>
      renderTemplate(withAction(['command: [echo, "{{ big }}"]']), context({ big })),
    );
    assert.equal(inArgs.message, 'line 8: tasks[0].actions[0].command[1]: must be at most 65536 bytes long');
    const inEnv = templateError(() =>
      renderTemplate(withAction(['command: ["true"]', 'environment: {BIG: "{{ big }}"}']), context({ big })),
    );
    assert.equal(
      inEnv.message,
      'line 9: tasks[0].actions[0].environment.BIG: must be at most 65536 bytes long',
    );
    const inShell = templateError(() =>
      renderTemplate(withAction(['command: |', '  true', '  echo {{ big }}']), context({ big })),
    );
    assert.equal(
      inShell.message,
      'line 10: tasks[0].actions[0].command: the value for SLIPWAY_VALUE_1 is 65537 bytes; at most 65536 are allowed',
    );
  });

  it('refuses a NUL in a shell value, naming the line of its placeholder', () => {
    const error = templateError(() =>
      renderTemplate(withAction(['command: |', '  true', '  echo {{ v }}']), context({ v: 'a\u0000b' })),
    );
    assert.match(
      error.message,
      /^line 10: tasks\[0\]\.actions\[0\]\.command: the value for SLIPWAY_VALUE_1 contains a NUL/,
    );
  });

  it('refuses a placeholder in a key, at its line', () => {
    const error = templateError(() =>
      validateTemplateSource(withAction(['command: ["true"]', 'environment:', '  "{{ name }}": x'])),
    );
    assert.equal(
      error.message,
      'line 10: tasks[0].actions[0].environment.{{ name }}: a placeholder cannot be a key; only values are rendered',
    );
  });

  it('refuses a block around YAML structure or across values, saying why', () => {
    const aroundItems = [
      'version: "0.1"',
      'name: t',
      'global_timeout: 60',
      'tasks:',
      '  - name: only',
      '    actions:',
      '{{#each hardware.interfaces}}',
      '      - name: "nic-{{ @index }}"',
      '        command: ["true"]',
      '{{/each}}',
    ].join('\n');
    const structure = templateError(() => validateTemplateSource(aroundItems));
    assert.match(
      structure.message,
      /^line 7: YAML syntax: .*a \{\{#block\}\} must open and close inside one value/,
    );
    const acrossValues = templateError(() =>
      validateTemplateSource(withAction(['command: ["echo", "{{#if x}}a", "b{{/if}}"]'])),
    );
    assert.match(
      acrossValues.message,
      /^line 8: placeholder syntax error near .*; a placeholder block \(\{\{#if\}\}, \{\{#each\}\}, \.\.\.\) must open and close inside one value/,
    );
  });

  it('refuses shell placeholders the shell would not expand', () => {
    const afterBackslash = templateError(() =>
      validateTemplateSource(withAction(['command: "echo \\\\\\\\{{ v }}"'])),
    );
    assert.equal(
      afterBackslash.message,
      'line 8: tasks[0].actions[0].command: a placeholder right after a backslash would not be expanded',
    );
    const quotedHereDocument = templateError(() =>
      validateTemplateSource(withAction(['command: |', "  cat <<'EOF'", '  {{ v }}', '  EOF'])),
    );
    assert.equal(
      quotedHereDocument.message,
      'line 10: tasks[0].actions[0].command: a placeholder in a here-document with a quoted delimiter is never expanded',
    );
  });

  it('refuses an environment name the shell values use', () => {
    const error = templateError(() =>
      validateTemplateSource(withAction(['command: "true"', 'environment: {SLIPWAY_VALUE_1: x}'])),
    );
    assert.match(error.message, /environment\.SLIPWAY_VALUE_1: is reserved/);
  });

  it('renders nothing in comments, and a shell value inside $(...) within double quotes stays whole', () => {
    const source = withAction([
      '# {{ not a placeholder, never rendered',
      `command: 'printf "%s" "$(printf "%s" {{ v }})"'`,
    ]);
    const spec = renderTemplate(source, context({ v: 'two  words * "q"' }));
    const shell = spec.tasks[0]?.actions[0];
    assert.ok(shell !== undefined);
    assert.deepEqual(shell.command, ['/bin/sh', '-c', 'printf "%s" "$(printf "%s" "${SLIPWAY_VALUE_1}")"']);
    assert.equal(run(shell).toString(), 'two  words * "q"');
  });
});
