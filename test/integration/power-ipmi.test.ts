// Goal: prove the IPMI driver (ipmitool over RMCP+) against a real BMC: OpenIPMI's ipmi_sim in
// front of a QEMU VM. Power on starts the VM process, off stops it, status follows the process,
// a cycle (off then on, as power steps) gives a new VM, and steps are idempotent; `chassis
// bootdev pxe` reaches the VM's boot order where the simulator lets it (chassis-control mode)
// and is reported as refused where it does not (startcmd mode), never as a silent success; a
// closed port is "unreachable" within a bound and a wrong password is "credentials"; the
// password never appears on ipmitool's command line.
// Method: test/support/ipmi-sim.ts starts the simulator on 127.0.0.1; the VM is tiny (TCG,
// 128 MiB, no disk) and at most one runs at a time.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { IpmitoolDriver, PowerDriverError } from '../../src/power/ipmitool.js';
import { runPowerStep } from '../../src/power/steps.js';
import { commandLine } from '../../src/platform/recorded-process.js';
import { IpmiSim, ipmiSimMissing } from '../support/ipmi-sim.js';
import { waitFor } from '../support/wait.js';
import { realClock } from '../../src/platform/clock.js';

const driver = new IpmitoolDriver({ timeoutMs: 10_000 });
const fast = { uefi: false, settleMs: 15_000, pollMs: 100, clock: realClock };

describe('IPMI driver against ipmi_sim (startcmd: the simulator manages the VM)', () => {
  before(() => assert.equal(ipmiSimMissing(), undefined));
  let sim: IpmiSim;
  before(async () => {
    sim = await IpmiSim.start();
  });
  after(async () => {
    await sim?.stop();
  });

  it('power on starts the VM, status follows it, off stops it; steps are idempotent', async () => {
    assert.equal(await driver.status(sim.target()), 'off');
    assert.equal(sim.vmPid(), undefined);
    const on = await runPowerStep(driver, sim.target(), 'on', fast);
    assert.deepEqual(on, { powerState: 'on', message: 'power on' });
    await waitFor('the VM process', () => sim.vmPid() !== undefined, 10_000, 50);
    const first = sim.vmPid();
    assert.equal(await driver.status(sim.target()), 'on');
    // Again: nothing to do, and the same VM keeps running.
    assert.deepEqual(await runPowerStep(driver, sim.target(), 'on', fast), {
      powerState: 'on',
      message: 'power was already on',
    });
    assert.equal(sim.vmPid(), first);
    // A cycle as the executor runs it: off, then on; a new VM process.
    assert.equal((await runPowerStep(driver, sim.target(), 'off', fast)).powerState, 'off');
    await waitFor('the VM to stop', () => sim.vmPid() === undefined, 10_000, 50);
    assert.equal(await driver.status(sim.target()), 'off');
    assert.equal((await runPowerStep(driver, sim.target(), 'off', fast)).message, 'power was already off');
    await runPowerStep(driver, sim.target(), 'on', fast);
    await waitFor('a new VM process', () => sim.vmPid() !== undefined, 10_000, 50);
    assert.notEqual(sim.vmPid(), first);
    await runPowerStep(driver, sim.target(), 'off', fast);
    await waitFor('the VM to stop', () => sim.vmPid() === undefined, 10_000, 50);
  });

  it('a boot device the simulator cannot keep is a clear refusal, not a silent success', async () => {
    await assert.rejects(
      driver.bootDevice(sim.target(), 'pxe', false),
      (e: unknown) =>
        e instanceof PowerDriverError &&
        e.kind === 'refused' &&
        /Invalid data field in request/.test(e.message),
    );
  });

  it('a wrong password is a credentials error naming the fix, without the password', async () => {
    const started = Date.now();
    await assert.rejects(driver.status(sim.target('not-the-password')), (e: unknown) => {
      assert.ok(e instanceof PowerDriverError);
      assert.equal(e.kind, 'credentials');
      assert.match(e.message, /refused the login: wrong user name or password/);
      assert.doesNotMatch(e.message, /not-the-password/);
      return true;
    });
    assert.ok(Date.now() - started < 10_000);
  });

  it('ipmitool never gets the password on its command line', async () => {
    const seen: string[][] = [];
    const watching = driver.status(sim.target());
    // Sample every process's argv while the call runs; ipmitool lives ~100 ms.
    for (let round = 0; round < 2000; round++) {
      for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
        const argv = commandLine(Number(pid));
        if (argv?.some((a) => a.endsWith('ipmitool')) === true) seen.push(argv);
      }
      // Yield to the event loop (ipmitool's exit is a macrotask), then stop once it is done.
      await new Promise((resolve) => setImmediate(resolve));
      if (await Promise.race([watching.then(() => true), Promise.resolve(false)])) break;
    }
    await watching;
    for (const argv of seen) assert.ok(!argv.includes(sim.password), `argv: ${argv.join(' ')}`);
  });
});

describe('IPMI driver against ipmi_sim (chassis-control: the boot device reaches the VM)', () => {
  before(() => assert.equal(ipmiSimMissing(), undefined));
  let sim: IpmiSim;
  before(async () => {
    sim = await IpmiSim.start({ mode: 'chassis-control' });
  });
  after(async () => {
    await sim?.stop();
  });

  it('bootdev pxe then on boots the VM from the network; bootdev disk from disk', async () => {
    assert.equal(
      (await runPowerStep(driver, sim.target(), 'bootdev-pxe', { ...fast, uefi: true })).message,
      'next boot from pxe (UEFI)',
    );
    await runPowerStep(driver, sim.target(), 'on', fast);
    await waitFor('the VM process', () => sim.vmPid() !== undefined, 10_000, 50);
    assert.equal(sim.vmBootOrder(), 'n');
    await runPowerStep(driver, sim.target(), 'bootdev-disk', fast);
    await runPowerStep(driver, sim.target(), 'off', fast);
    assert.equal(sim.vmPid(), undefined);
    await runPowerStep(driver, sim.target(), 'on', fast);
    assert.equal(sim.vmBootOrder(), 'c');
    await runPowerStep(driver, sim.target(), 'off', fast);
  });
});

describe('IPMI driver: an unreachable BMC', () => {
  before(() => assert.equal(ipmiSimMissing(), undefined));
  it('a closed port is "unreachable" within a bound', async () => {
    const started = Date.now();
    await assert.rejects(
      new IpmitoolDriver({ timeoutMs: 8000 }).status({
        host: '127.0.0.1',
        port: 9,
        username: 'a',
        password: 'b',
      }),
      (e: unknown) =>
        e instanceof PowerDriverError && e.kind === 'unreachable' && /did not answer/.test(e.message),
    );
    assert.ok(Date.now() - started < 8500, `took ${String(Date.now() - started)} ms`);
  });
});

// The test harness's own BMC: a simulator that does not answer within its time is started once
// more on the same configuration (cluster/bmc-sim.ts), and a second silence is an error that
// says what the simulator printed.
describe('the BMC simulator harness', () => {
  before(() => assert.equal(ipmiSimMissing(), undefined));
  it('starts a simulator that stays silent once more, and names what it printed after two', async () => {
    const seen = new Set<IpmiSim>();
    const sim = await IpmiSim.start({
      answerWithinMs: 1000,
      // Silent to the first simulator, as the loaded machine's was; real ipmitool for the second.
      probe: async (s) => {
        seen.add(s);
        return (
          seen.size > 1 && (await new IpmitoolDriver({ timeoutMs: 3000 }).status(s.target())) !== undefined
        );
      },
    });
    try {
      assert.equal(seen.size, 2);
      assert.equal(await new IpmitoolDriver({ timeoutMs: 3000 }).status(sim.target()), 'off');
    } finally {
      await sim.stop();
    }
    await assert.rejects(
      IpmiSim.start({ answerWithinMs: 500, probe: () => Promise.resolve(false) }),
      /timed out after 500 ms waiting for ipmi_sim to answer on its LAN port \(started 2 times\); ipmi_sim printed: /,
    );
  });
});
