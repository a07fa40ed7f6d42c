// Goal: the Tinkerbell objects under examples/tinkerbell/ (written as Tinkerbell's docs write them)
// are what `slipway import -f examples/tinkerbell --dry-run` accepts: one machine with its BMC,
// one template, one workflow on that machine, nothing refused; and the imported template renders
// for the imported machine into the built-ins, kexec with only BLOCK_DEVICE and FS_TYPE.
// Method: the directory's YAML files through the import's pure mapping (src/tinkerbell/) and the
// workflow renderer, as a workflow create would render it.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Hardware } from '../../src/model/records.js';
import { readObjects } from '../../src/tinkerbell/objects.js';
import { planImport } from '../../src/tinkerbell/plan.js';
import { reconcile } from '../../src/tinkerbell/reconcile.js';
import { renderTemplate } from '../../src/workflow/template.js';

const dir = new URL('../../examples/tinkerbell/', import.meta.url);
const files = readdirSync(dir)
  .filter((name) => name.endsWith('.yaml'))
  .sort()
  .map((name) => ({ path: name, text: readFileSync(new URL(name, dir), 'utf8') }));
const plan = planImport(readObjects(files), { skipUnknown: false });

test('the examples map to one machine with its BMC, one template and one workflow', () => {
  assert.deepEqual(
    files.map((f) => f.path),
    ['bmc.yaml', 'hardware.yaml', 'template.yaml', 'workflow.yaml'],
  );
  const hw = plan.hardware[0]?.input;
  assert.equal(plan.hardware.length, 1);
  assert.equal(hw?.id, 'sm01');
  assert.deepEqual(hw?.bmc, { address: 'ipmi://10.0.1.21:623', username: 'admin', password: 'admin' });
  assert.deepEqual(hw?.interfaces[0]?.ip, { address: '10.0.0.21', prefix: 24 });
  assert.deepEqual(
    plan.templates.map((t) => t.name),
    ['ubuntu'],
  );
  assert.deepEqual(plan.workflows, [
    {
      name: 'sm01-ubuntu',
      template: 'ubuntu',
      hardwareId: 'sm01',
      hardwareMap: { device_1: '52:54:00:0a:00:15' },
      netboot: false,
    },
  ]);
  assert.deepEqual(plan.skipped, []);
  const steps = reconcile(plan, { hardware: [], templates: [], workflows: [] });
  assert.deepEqual(
    steps.map((s) => `${s.kind} ${s.name}`),
    ['template ubuntu', 'hardware sm01', 'workflow sm01-ubuntu'],
  );
});

test('the imported template renders for the imported machine: hub images as built-ins', () => {
  const input = plan.hardware[0]!.input;
  const hardware: Hardware = { ...input, workerTokenSha256: '', createdMs: 0, updatedMs: 0, version: 1 };
  const workflow = plan.workflows[0]!;
  const spec = renderTemplate(plan.templates[0]!.source, {
    workflowId: 'wf-1',
    hardware,
    hardwareMap: workflow.hardwareMap,
    resolveWorker: (value) =>
      value === input.interfaces[0]?.mac || value === input.id ? input.id : undefined,
  });
  assert.equal(spec.tasks[0]?.worker, 'sm01');
  const actions = spec.tasks[0]?.actions ?? [];
  assert.deepEqual(
    actions.map((a) => a.builtin),
    ['image2disk', 'writefile', 'kexec'],
  );
  assert.deepEqual(actions[2]?.env, { BLOCK_DEVICE: '/dev/sda1', FS_TYPE: 'ext4' });
});
