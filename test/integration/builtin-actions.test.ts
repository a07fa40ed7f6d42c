// Goal: prove, with a real node and a real worker process, that a Tinkerbell template's reboot
// action (the hub image, unchanged) runs as the built-in and that the machine's reboot happens
// only after the cluster has committed the action's success: the workflow ends SUCCESS, and
// whenever the reboot has been done, a linearizable read already shows the action SUCCESS.
// Method: a 1-node `slipway server` and a `slipway worker` whose SLIPWAY_MACHINE_CONTROL=record:
// FILE appends the effect to FILE instead of rebooting this machine. The first action is a
// command writing a marker file. Each poll reads FILE first and the state second, so a reboot
// seen before its SUCCESS is committed would fail the test.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ClusterClient } from '../../src/cli/client.js';
import { ProcessCluster, slipwayBin } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

const adminToken = 'admin-token-for-the-builtin-actions-test';
let cluster: ProcessCluster;
let admin: ClusterClient;
let worker: ChildProcess | undefined;

before(async () => {
  cluster = new ProcessCluster(1, []);
  cluster.requireToken(adminToken);
  cluster.startAll();
  await cluster.waitForLeader();
  admin = new ClusterClient(cluster.apiAddrs(), { timeoutMs: 20_000, token: adminToken });
});

after(async () => {
  admin.close();
  if (worker !== undefined && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise<void>((resolve) => worker?.once('exit', () => resolve()));
    worker.kill('SIGKILL');
    await exited;
  }
  await cluster.destroy();
});

describe('built-in reboot', () => {
  test('reboots only after the cluster has committed the reboot action SUCCESS', async () => {
    const marker = join(cluster.dir, 'installed');
    const effects = join(cluster.dir, 'machine-effects');
    const template = `version: "0.1"
name: install-then-reboot
global_timeout: 300
tasks:
  - name: provision
    actions:
      - name: install
        command: ["sh", "-c", "echo installed > \\"$MARKER\\""]
        timeout: 60
        environment:
          MARKER: ${marker}
      - name: reboot
        image: quay.io/tinkerbell/actions/reboot:v1.0.0
        timeout: 60
`;
    await admin.control('templateCreate', { source: template, replace: false });
    const hardware = { id: 'hw-1', interfaces: [{ mac: '02:00:00:00:01:01', ip: '10.78.0.11/24' }] };
    await admin.control('hardwareCreate', { documentJson: JSON.stringify(hardware), replace: false });
    const token = (await admin.control('hardwareToken', { id: 'hw-1' })).token;
    const created = await admin.control('workflowCreate', {
      template: 'install-then-reboot',
      hardwareId: 'hw-1',
      hardwareMap: {},
      netboot: false,
    });
    const id = created.workflow?.id ?? '';
    const tokenFile = join(cluster.dir, 'hw-1.token');
    writeFileSync(tokenFile, token);
    const log = openSync(join(cluster.dir, 'hw-1.worker.log'), 'a');
    const args = [slipwayBin, 'worker', '--id', 'hw-1', '--server', cluster.apiAddrs().join(',')];
    args.push('--token-file', tokenFile, '--journal-dir', join(cluster.dir, 'journal'));
    worker = spawn(process.execPath, args, {
      stdio: ['ignore', log, log],
      env: { ...process.env, SLIPWAY_MACHINE_CONTROL: `record:${effects}` },
    });

    let polls = 0;
    await waitFor(
      'the recorded reboot',
      async () => {
        polls += 1;
        // The effect first, then the state: once rebooted, the success must already be there.
        const rebooted = existsSync(effects) && readFileSync(effects, 'utf8') !== '';
        const workflow = (await admin.control('workflowGet', { id, local: false })).workflow;
        const state = workflow?.actions.map((action) => `${action.name}=${action.state}`).join(' ');
        if (rebooted) {
          assert.equal(
            state,
            'install=SUCCESS reboot=SUCCESS',
            `rebooted while the state said: ${state ?? '?'}`,
          );
          assert.equal(workflow?.state, 'SUCCESS');
        }
        return rebooted;
      },
      60_000,
      20,
    );
    assert.ok(polls > 1, 'the reboot was not already there at the first look');
    assert.equal(readFileSync(effects, 'utf8'), 'reboot\n');
    assert.equal(readFileSync(marker, 'utf8'), 'installed\n');
    const workflow = (await admin.control('workflowGet', { id, local: false })).workflow;
    assert.equal(workflow?.actions[1]?.message, 'reboot scheduled');
    assert.match(workflow?.actions[1]?.outputTail ?? '', /once the cluster has recorded this result/);
  });
});
