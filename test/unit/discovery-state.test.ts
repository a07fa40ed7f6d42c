// Goal: discovery and inventory as the replicated state applies them (docs/decisions/0029): an
// unknown MAC's inventory boot enrols a machine bound to its per-boot credential; its report is
// accepted only with that credential, once (the same report again is answered as recorded, any
// other is refused and recorded in the trail); a
// report that is a known machine by fingerprint (a replaced NIC) folds into it instead of making a
// new machine; an inspecting machine goes ready when its facts held and to maintenance, the drift
// named, when they did not; accept makes an enrolled machine ready, and accepting twice is a clear
// error; selectors read the stored inventory; nothing of it below state version 3.
// Method: ControlState driven through apply() with leader stamps (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlCommand } from '../../src/state/control/commands.js';
import type { Inventory } from '../../src/model/inventory.js';
import type { JsonValue } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { machineFacts, matches, parseSelector, SelectorError } from '../../src/fleet/selector.js';
import { LifecycleHarness, operator } from '../support/lifecycle-harness.js';
import { exampleInventory } from '../support/inventory-arbitrary.js';
import { hardwareJson } from '../../src/api/control-messages.js';

const sha = (c: string): string => c.repeat(64);
const json = (inventory: Inventory): JsonValue => JSON.parse(JSON.stringify(inventory)) as JsonValue;

function claim(workerId: string, mac: string, ip: string, credential: string): ControlCommand {
  return {
    type: 'credential.inventory',
    workerId,
    mac,
    ip,
    sha256: sha(credential),
    ttlS: 600,
    workerTokenSha256: sha('f'),
  };
}

function report(id: string, credential: string, inventory: Inventory = exampleInventory): ControlCommand {
  return {
    type: 'hardware.inventory',
    id,
    credentialSha256: sha(credential),
    inventory: json(inventory),
    audit: { user: `worker ${id}`, role: 'viewer', address: '10.0.0.9:1', method: 'Worker/Connect' },
  };
}

const accept = (id: string): ControlCommand => ({
  type: 'hardware.lifecycle',
  id,
  verb: 'accept',
  reason: 'checked',
  audit: operator,
});

/** A machine the operator registered, inspected and whose first inventory was taken: ready. */
function inspectedMachine(h: LifecycleHarness, inventory: Inventory = exampleInventory): void {
  h.machine('m1', 1);
  h.ok(
    { type: 'hardware.lifecycle', id: 'm1', verb: 'inspect', reason: 'first', audit: operator },
    'hardware',
  );
  h.ok(claim('m1', '02:00:00:00:00:01', '10.0.0.1', 'b'), 'hardware');
  h.ok(report('m1', 'b', inventory), 'hardware');
}

describe('discovery', () => {
  it('an unknown MAC is enrolled with its inventory; accept makes it ready, and only once', () => {
    const h = new LifecycleHarness();
    const made = h.ok(claim('discovered-1', '52:54:00:AA:00:01', '10.0.0.50', 'c'), 'hardware').hardware;
    assert.equal(made.lifecycle?.state, 'enrolled');
    assert.match(made.lifecycle?.reason ?? '', /discovered: booted from 52:54:00:aa:00:01/);
    assert.deepEqual(
      made.interfaces.map((i) => i.mac),
      ['52:54:00:aa:00:01'],
    );
    assert.equal(made.inspection?.sha256, sha('c'));
    assert.equal(made.inspection?.expiresMs, h.nowMs + 600_000);
    assert.equal(h.state.hardwareByMac('52:54:00:aa:00:01')?.hardware.id, 'discovered-1');

    h.nowMs += 1_000;
    const reported = h.ok(report('discovered-1', 'c'), 'hardware').hardware;
    assert.equal(reported.lifecycle?.state, 'enrolled', 'a discovered machine waits for accept');
    assert.deepEqual(reported.inventory, exampleInventory);
    assert.equal(reported.inspection, undefined, 'the credential is used up');
    assert.equal(reported.uefi, true, 'firmware from the inventory');

    // Selectors read the stored inventory: the record is a FactSource.
    const selector = parseSelector('memory>=64Gi,disks.count>=2,firmware=uefi,system.vendor=Supermicro');
    assert.ok(!(selector instanceof SelectorError));
    assert.equal(matches(selector, machineFacts(reported)), true);
    assert.equal(matches(selector, machineFacts({ ...reported, inventory: undefined })), false);

    const ready = h.ok(accept('discovered-1'), 'hardware').hardware;
    assert.equal(ready.lifecycle?.state, 'ready');
    h.refused(accept('discovered-1'), 'E_CONFLICT', /is ready; accept is not one of its moves/);
  });

  it('refuses a claim whose fields are malformed, naming the field, and enrolls nothing', () => {
    const h = new LifecycleHarness();
    const good = claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c');
    const bad = (fields: Record<string, string>): ControlCommand => ({ ...good, ...fields });
    h.refused(bad({ workerTokenSha256: 'nothex' }), 'E_INVALID', /^workerTokenSha256/);
    h.refused(bad({ claimKey: 'nothex' }), 'E_INVALID', /^claimKey/);
    h.refused(bad({ sha256: 'nothex' }), 'E_INVALID', /^sha256/);
    h.refused(bad({ mac: '52:54:00' }), 'E_INVALID', /mac: "52:54:00" is not a MAC address/);
    assert.equal(h.state.hardwareByMac('52:54:00:aa:00:01'), undefined);
  });

  it('refuses a report without the machine credential, and records the refusal', () => {
    const h = new LifecycleHarness();
    h.ok(claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c'), 'hardware');
    h.refused(report('discovered-1', 'd'), 'E_INVALID', /not the machine's inventory-boot credential/);
    const trail = h.state.auditTrail({ kind: 'hardware.inventory', limit: 10 }).entries;
    assert.equal(trail.length, 1);
    assert.equal(trail[0]?.user, 'worker discovered-1');
    assert.match(trail[0]?.error?.message ?? '', /inventory report for hardware "discovered-1" refused/);
    h.refused(report('nobody', 'c'), 'E_NOT_FOUND');

    const recorded = h.ok(report('discovered-1', 'c'), 'hardware').hardware;
    // The same report again (its answer lost) is answered as recorded and changes nothing; any
    // other report with the used-up credential is refused.
    assert.deepEqual(h.ok(report('discovered-1', 'c'), 'hardware').hardware, recorded);
    assert.equal(h.state.hardware('discovered-1')?.version, recorded.version);
    h.refused(
      report('discovered-1', 'c', { ...exampleInventory, disks: [] }),
      'E_INVALID',
      /holds no inventory-boot credential/,
    );
    assert.doesNotMatch(hardwareJson(recorded), /reportedWith/, 'no digest in views');
    // An expired credential is refused by the stamp.
    h.ok(claim('discovered-2', '52:54:00:aa:00:02', '10.0.0.51', 'e'), 'hardware');
    h.nowMs += 601_000;
    h.refused(
      report('discovered-2', 'e', { ...exampleInventory, nics: [], disks: [], system: {} }),
      'E_INVALID',
      /expired/,
    );
  });

  it('refuses a bad inventory, a claim for a machine not inspecting, and a taken id', () => {
    const h = new LifecycleHarness();
    h.ok(claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c'), 'hardware');
    h.refused(
      { ...report('discovered-1', 'c'), inventory: { cpu: 'fast' } } as ControlCommand,
      'E_INVALID',
      /^inventory: /,
    );
    h.machine('m1', 1);
    h.ok(accept('m1'), 'hardware');
    h.refused(claim('m1', '02:00:00:00:00:01', '10.0.0.1', 'b'), 'E_CONFLICT', /is ready: an inventory boot/);
    h.refused(claim('m1', '02:00:00:00:00:01', '10.0.0.7', 'b'), 'E_INVALID', /from Slipway's DHCP/);
    h.refused(claim('m1', '52:54:00:aa:00:09', '10.0.0.9', 'b'), 'E_EXISTS');
    h.refused(claim('discovered-3', 'zz', '10.0.0.9', 'b'), 'E_INVALID', /not a MAC/);
  });

  it('knows a machine by its fingerprint: a replaced NIC folds into the known machine', () => {
    const h = new LifecycleHarness();
    inspectedMachine(h);
    assert.equal(h.lifecycle('m1').state, 'ready');
    // eno1 replaced: the machine boots from a MAC nobody knows.
    const nics = [{ ...exampleInventory.nics[0]!, mac: '3c:ec:ef:00:00:99' }, exampleInventory.nics[1]!];
    h.ok(claim('discovered-9', '3c:ec:ef:00:00:99', '10.0.0.60', 'c'), 'hardware');
    const folded = h.ok(report('discovered-9', 'c', { ...exampleInventory, nics }), 'hardware').hardware;
    assert.equal(folded.id, 'm1');
    assert.equal(h.state.hardware('discovered-9'), undefined, 'no new machine');
    assert.deepEqual(
      folded.interfaces.map((i) => i.mac),
      ['02:00:00:00:00:01', '3c:ec:ef:00:00:99'],
    );
    assert.equal(h.state.hardwareByMac('3c:ec:ef:00:00:99')?.hardware.id, 'm1');
    assert.equal(folded.lifecycle?.state, 'ready');
    assert.deepEqual(folded.inventory?.nics, nics);
  });

  it('an inspection whose facts held is ready; one that drifted is maintenance with the drift named', () => {
    const h = new LifecycleHarness();
    inspectedMachine(h);
    const last = h.lifecycle('m1').history.at(-1);
    assert.deepEqual([last?.from, last?.to, last?.trigger], ['inspecting', 'ready', 'inspected']);

    h.ok(
      { type: 'hardware.lifecycle', id: 'm1', verb: 'inspect', reason: 'again', audit: operator },
      'hardware',
    );
    h.ok(claim('m1', '02:00:00:00:00:01', '10.0.0.1', 'd'), 'hardware');
    const halved = { ...exampleInventory, memory: { totalBytes: 64 * 2 ** 30, usableBytes: 62 * 2 ** 30 } };
    h.ok(report('m1', 'd', halved), 'hardware');
    const lc = h.lifecycle('m1');
    assert.equal(lc.state, 'maintenance');
    assert.match(lc.reason ?? '', /^inventory drifted: memory 128Gi → 64Gi; accept it/);
    assert.equal(lc.history.at(-1)?.trigger, 'drift');
    assert.equal(h.lifecycle('m1').deadlineMs, undefined);
    h.ok(accept('m1'), 'hardware');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.equal(h.state.hardware('m1')?.inventory?.memory.totalBytes, 64 * 2 ** 30);
  });

  it('survives a snapshot, and is refused below state version 3', () => {
    const h = new LifecycleHarness();
    inspectedMachine(h);
    h.ok(claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c'), 'hardware');
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.hardware('m1'), h.state.hardware('m1'));
    assert.deepEqual(copy.hardware('discovered-1'), h.state.hardware('discovered-1'));

    const old = new LifecycleHarness(2);
    old.refused(
      claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c'),
      'E_INVALID',
      /needs cluster version 3/,
    );
  });
});

const rule = (selector?: string): ControlCommand => ({
  type: 'hardware.acceptRule',
  ...(selector === undefined ? {} : { selector }),
  audit: operator,
});

// The auto-accept rule (docs/decisions/0037): set, replaced and cleared by a replicated command; an
// enrolled machine whose report matches is ready in the report's entry, the event naming the rule;
// one that does not match, or a report with no rule, stays enrolled; a bad selector changes nothing;
// the rule survives a snapshot; below state version 3 it is refused.
describe('the auto-accept rule', () => {
  it('makes a matching enrolled machine ready when its report is applied, saying which rule', () => {
    const h = new LifecycleHarness();
    assert.equal(h.state.acceptRule, undefined);
    const set = h.ok(rule('memory >= 64Gi, firmware=uefi'), 'acceptRule');
    assert.equal(set.selector, 'memory>=64Gi,firmware=uefi', 'kept canonical');
    h.ok(claim('discovered-1', '52:54:00:aa:00:01', '10.0.0.50', 'c'), 'hardware');
    const accepted = h.ok(report('discovered-1', 'c'), 'hardware').hardware;
    assert.equal(accepted.lifecycle?.state, 'ready');
    const last = accepted.lifecycle?.history.at(-1);
    assert.deepEqual(
      [last?.from, last?.to, last?.trigger, last?.reason],
      ['enrolled', 'ready', 'accept', 'accepted by rule memory>=64Gi,firmware=uefi'],
    );
    assert.match(last?.by ?? '', /^accept rule/);
    assert.ok(
      h.published.some((p) => p.hardwareId === 'discovered-1' && p.event.trigger === 'accept'),
      'the transition is published',
    );

    // A machine the rule does not match waits for accept.
    h.ok(rule('memory>=1Ti'), 'acceptRule');
    h.ok(claim('discovered-2', '52:54:00:aa:00:02', '10.0.0.51', 'd'), 'hardware');
    const small = {
      ...exampleInventory,
      nics: [{ ...exampleInventory.nics[0]!, mac: '52:54:00:aa:00:02' }],
      disks: [],
      system: {},
    };
    assert.equal(h.ok(report('discovered-2', 'd', small), 'hardware').hardware.lifecycle?.state, 'enrolled');

    // Cleared: nothing is accepted by itself.
    assert.equal(h.ok(rule(), 'acceptRule').selector, undefined);
    assert.equal(h.state.acceptRule, undefined);
    h.ok(claim('discovered-3', '52:54:00:aa:00:03', '10.0.0.52', 'e'), 'hardware');
    const third = { ...small, nics: [{ ...exampleInventory.nics[0]!, mac: '52:54:00:aa:00:03' }] };
    assert.equal(h.ok(report('discovered-3', 'e', third), 'hardware').hardware.lifecycle?.state, 'enrolled');
  });

  it('refuses a bad selector, changing nothing; survives a snapshot; needs state version 3', () => {
    const h = new LifecycleHarness();
    h.ok(rule('rack=a'), 'acceptRule');
    h.refused(rule('memory>=64Gx'), 'E_INVALID', /^selector: .*unknown unit "Gx"/);
    h.refused(rule(' '), 'E_INVALID', /an empty rule would accept every machine/);
    assert.equal(h.state.acceptRule, 'rack=a');
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.equal(copy.acceptRule, 'rack=a');
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    const trail = h.state.auditTrail({ kind: 'hardware.acceptRule', limit: 10 }).entries;
    assert.deepEqual(
      trail.map((e) => [e.target, e.error === undefined]),
      [
        [' ', false],
        ['memory>=64Gx', false],
        ['rack=a', true],
      ],
      'newest first, the refusals too',
    );
    const old = new LifecycleHarness(2);
    old.refused(rule('rack=a'), 'E_INVALID', /needs cluster version 3/);
  });
});
