// Goal: the worked example in examples/fleet is one an operator can follow as written: its two
// templates pass the checks `template create` makes, render for a pool member with an image into
// the actions they promise (image2disk of the pool's image onto the first disk, then reboot; a
// wipe of that disk), and every `slipway ...` command line in its README is one the CLI takes,
// with selectors that parse.
// Method: validateTemplateSource and renderTemplate on the files (pure), a machine with the
// example inventory of test/support; the real CLI's `__manual` for the command lines, checked as
// test/unit/cli-help.test.ts checks the help's examples; parseSelector for the selectors.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import type { Hardware } from '../../src/model/records.js';
import { parseSelector } from '../../src/fleet/selector-parse.js';
import { renderTemplate, validateTemplateSource, type RenderContext } from '../../src/workflow/template.js';
import { commandLineProblem, readManual, shellWords, type ManualPage } from '../support/cli-examples.js';
import { exampleInventory } from '../support/inventory-arbitrary.js';

const dir = new URL('../../examples/fleet/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, dir), 'utf8');

const machine: Hardware = {
  id: 'discovered-525400aa0001',
  interfaces: [{ mac: '52:54:00:aa:00:01', dns: [], leaseTimeS: 3600 }],
  arch: 'x86_64',
  uefi: true,
  netboot: { allowPXE: true, allowWorkflow: true },
  metadata: {},
  inventory: exampleInventory,
  workerTokenSha256: 'a'.repeat(64),
  createdMs: 1,
  updatedMs: 1,
  version: 1,
};

const image = {
  name: 'ubuntu-24.04',
  sha256: 'b'.repeat(64),
  path: '/artifacts/ubuntu-24.04',
  url: 'http://10.0.0.10:8080/artifacts/ubuntu-24.04',
};

function member(withImage: boolean): RenderContext {
  return {
    workflowId: 'web-1',
    hardware: machine,
    hardwareMap: {},
    resolveWorker: (value) => (value === machine.id ? value : undefined),
    pool: withImage ? { name: 'web', image } : { name: 'web' },
  };
}

describe('examples/fleet templates', () => {
  test('pass the checks of `template create`, under the names the README uses', () => {
    assert.deepEqual(validateTemplateSource(read('install.yaml')), { name: 'install' });
    assert.deepEqual(validateTemplateSource(read('wipe.yaml')), { name: 'wipe' });
  });

  test("install.yaml writes the pool's image to the first disk, then reboots", () => {
    const spec = renderTemplate(read('install.yaml'), member(true));
    const [write, reboot] = spec.tasks[0]?.actions ?? [];
    assert.equal(spec.tasks[0]?.worker, machine.id);
    assert.equal(write?.builtin, 'image2disk');
    assert.deepEqual(write?.env, {
      IMG_URL: image.url,
      IMG_SHA256: image.sha256,
      DEST_DISK: '/dev/sda',
      COMPRESSED: 'true',
    });
    assert.equal(reboot?.builtin, 'reboot');
    // A pool without --image has no image to write: refused when the workflow is made.
    assert.throws(() => renderTemplate(read('install.yaml'), member(false)), /pool/);
  });

  test('wipe.yaml zeroes the head of that disk, the path one argument', () => {
    const spec = renderTemplate(read('wipe.yaml'), member(true));
    const action = spec.tasks[0]?.actions[0];
    assert.equal(action?.builtin, undefined);
    assert.deepEqual(
      [...(action?.command ?? []), ...(action?.args ?? [])],
      ['dd', 'if=/dev/zero', 'of=/dev/sda', 'bs=1M', 'count=64', 'conv=fsync'],
    );
  });
});

/** The README's command lines: indented, starting `slipway` or `$ slipway`, continuations joined. */
function commandLines(markdown: string): string[] {
  const lines: string[] = [];
  let pending: string | undefined;
  for (const raw of markdown.split('\n')) {
    const text = raw.trim();
    if (pending !== undefined) pending = `${pending.slice(0, -1).trimEnd()} ${text}`;
    else if (/^ {4}/.test(raw) && /^(\$ )?slipway /.test(text)) pending = text.replace(/^\$ /, '');
    else continue;
    if (!pending.endsWith('\\')) {
      lines.push(pending);
      pending = undefined;
    }
  }
  return lines;
}

/** The selectors a command line gives: `--selector S`, `hardware explain S`, `accept-rule set S`. */
function selectorsOf(line: string): string[] {
  const words = shellWords(line);
  return words.flatMap((w, i) => {
    const before = words.slice(Math.max(0, i - 2), i).join(' ');
    return /(^|\s)--selector$|hardware explain$|accept-rule set$/.test(before) ? [w] : [];
  });
}

describe('examples/fleet/README.md', () => {
  let pages: ManualPage[];
  let lines: string[];
  before(async () => {
    pages = await readManual();
    lines = commandLines(read('README.md'));
  });

  test('every slipway command line is one the CLI takes', () => {
    assert.ok(lines.length >= 30, `${lines.length} command lines`);
    const problems = lines.flatMap((line) => {
      const problem = commandLineProblem(pages, line);
      return problem === undefined ? [] : [`${line}: ${problem}`];
    });
    assert.deepEqual(problems, []);
    // Each step of the walk-through is there.
    for (const step of ['accept-rule set', 'hardware label', 'hardware explain', 'pool create', 'pool taint'])
      assert.ok(
        lines.some((l) => l.includes(step)),
        step,
      );
  });

  test('every selector it gives parses', () => {
    const selectors = lines.flatMap(selectorsOf);
    assert.ok(selectors.length >= 5, `${selectors.length} selectors`);
    const bad = selectors.filter((s) => parseSelector(s) instanceof Error);
    assert.deepEqual(bad, []);
  });
});
