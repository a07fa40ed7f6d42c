// Goal: prove power control end to end: a real `slipway server` (one node, to keep the shared
// CPUs free) carries out `slipway power on ID` on a real BMC (ipmi_sim) in front of a real VM,
// `power status` then says on, `power off` stops the VM; a step the BMC refuses fails the job
// with exit code 1 and the BMC's reason; and the BMC password given in a credentials file
// never appears in `hardware get -o json`, in CLI output, nor in the node's log.
// Method: test/support/ipmi-sim.ts (startcmd mode) and test/support/process-cluster.ts; the
// CLI is the real bin/slipway.js. Waits are on conditions with deadlines.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';
import { ProcessCluster, runSlipway, type CliResult } from '../support/process-cluster.js';
import { waitFor } from '../support/wait.js';

describe('slipway power against ipmi_sim + QEMU', () => {
  before(() => assert.equal(ipmiSimMissing(), undefined));
  let sim: IpmiSim;
  let cluster: ProcessCluster;
  let server: string;
  const cli = (...args: string[]): Promise<CliResult> =>
    runSlipway(['--server', server, ...args], { timeoutMs: 90_000 });

  before(async () => {
    sim = await IpmiSim.start();
    cluster = new ProcessCluster(1);
    cluster.startAll();
    await cluster.waitForLeader();
    server = cluster.apiAddrs().join(',');
    const credentials = join(cluster.dir, 'bmc.credentials');
    writeFileSync(credentials, `${sim.username}:${sim.password}\n`, { mode: 0o600 });
    const created = await cli(
      'hardware',
      'create',
      '--id',
      'vm1',
      '--mac',
      '52:54:00:00:00:01',
      '--ip',
      '10.9.0.5/24',
      '--bmc',
      sim.address,
      '--bmc-credentials-file',
      credentials,
    );
    assert.equal(created.code, 0, created.stderr);
  });
  after(async () => {
    await cluster?.destroy();
    await sim?.stop();
  });

  it('power on starts the VM and power status says on; power off stops it', async () => {
    const on = await cli('power', 'on', 'vm1');
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /^vm1: power on; on SUCCEEDED: power on$/m);
    await waitFor('the VM process', () => sim.vmPid() !== undefined, 10_000, 50);
    const status = await cli('-o', 'json', 'power', 'status', 'vm1');
    assert.equal(status.code, 0, status.stderr);
    const doc = JSON.parse(status.stdout) as { powerState: string; state: string; finished: boolean };
    assert.deepEqual([doc.powerState, doc.state, doc.finished], ['on', 'SUCCEEDED', true]);
    const off = await cli('power', 'off', 'vm1');
    assert.equal(off.code, 0, off.stderr);
    assert.equal(sim.vmPid(), undefined);
    const table = await cli('power', 'status', 'vm1');
    assert.match(table.stdout, /power off/);
    const jobs = await cli('-o', 'json', 'power', 'job', 'list', '--hardware', 'vm1');
    const list = JSON.parse(jobs.stdout) as { jobs: { op: string; state: string }[] };
    assert.deepEqual(
      list.jobs.map((j) => `${j.op}:${j.state}`),
      ['on:SUCCEEDED', 'status:SUCCEEDED', 'off:SUCCEEDED', 'status:SUCCEEDED'],
    );
  });

  it('a step the BMC refuses fails the job: exit 1 with the reason', async () => {
    // The startcmd simulator keeps no boot device, so netboot's first step is refused.
    const netboot = await cli('power', 'netboot', 'vm1');
    assert.equal(netboot.code, 1, netboot.stdout);
    assert.match(
      netboot.stderr,
      /power netboot of "vm1" failed: step 0 \(bootdev-pxe\) gave up after 3 attempts: .*Invalid data field/,
    );
    const missing = await cli('power', 'on', 'no-such-machine');
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /hardware "no-such-machine" does not exist/);
    const bad = await cli('power', 'on', 'vm1', '--wait', 'soon');
    assert.equal(bad.code, 2);
  });

  it('the BMC password is in no API output and in no log line', async () => {
    const got = await cli('-o', 'json', 'hardware', 'get', 'vm1');
    assert.equal(got.code, 0, got.stderr);
    assert.ok(!got.stdout.includes(sim.password), got.stdout);
    const hw = JSON.parse(got.stdout) as { bmc: { address: string; username: string; passwordSet: boolean } };
    assert.deepEqual(hw.bmc, { address: sim.address, username: sim.username, passwordSet: true });
    const list = await cli('-o', 'yaml', 'hardware', 'list');
    assert.ok(!list.stdout.includes(sim.password));
    const node = cluster.nodes[0];
    assert.ok(node !== undefined);
    const log = readFileSync(join(cluster.dir, `${node.id}.log`), 'utf8');
    assert.match(log, /power step done/);
    assert.ok(!log.includes(sim.password), 'the node log holds the BMC password');
  });
});
