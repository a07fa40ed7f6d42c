// Goal: the pools' leader duty (src/node/pool-keeper.ts): only a leader proposes; a pool short of
// machines gets one pool.allocate per scan offering ready matching machines, each with the pool's
// template rendered for it; the pool fills to its size and no further, a failed member is
// replaced, and a keeper on another node (a new leader) reading the same state carries on and
// never allocates past the size.
// Method: a real ControlState (test/support/lifecycle-harness.ts) whose proposals the test applies.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { PoolKeeper } from '../../src/node/pool-keeper.js';
import { LifecycleHarness, operator } from '../support/lifecycle-harness.js';
import { realClock } from '../../src/platform/clock.js';

const template =
  'version: "0.1"\nname: os\nglobal_timeout: 600\ntasks:\n  - name: os\n    worker: "{{ hardware.id }}"\n    actions:\n      - name: install\n        command: ["true"]\n        timeout: 60\n';

function keeper(h: LifecycleHarness, leading: () => boolean, proposed: ControlCommand[]): PoolKeeper {
  return new PoolKeeper({
    artifactBaseUrl: 'http://192.0.2.1:8080',
    control: h.state,
    isLeader: leading,
    propose: (command): Promise<ControlResult> => {
      proposed.push(command);
      return Promise.resolve(h.run(command));
    },
    logger: pino({ level: process.env['DBG'] === undefined ? 'silent' : 'debug' }),
    clock: realClock,
  });
}

describe('the pool keeper', () => {
  it('fills a pool to its size, one machine per scan, replaces a failed member, as leader only', async () => {
    const h = new LifecycleHarness();
    h.ok({ type: 'template.put', name: 'os', source: template, audit: operator }, 'template');
    for (let n = 1; n <= 4; n++) {
      h.machine(`m${n}`, n);
      h.ok(
        { type: 'hardware.label', id: `m${n}`, set: { rack: 'a' }, remove: [], audit: operator },
        'hardware',
      );
      h.ok(h.verbCommand(`m${n}`, 'accept'), 'hardware');
    }
    h.ok(
      {
        type: 'pool.create',
        name: 'web',
        selector: 'rack=a',
        template: 'os',
        size: 2,
        spares: 0,
        audit: operator,
      },
      'pool',
    );
    let leader = false;
    const proposed: ControlCommand[] = [];
    const first = keeper(h, () => leader, proposed);
    await first.scan();
    assert.equal(proposed.length, 0, 'a follower proposes nothing');
    leader = true;
    await first.scan();
    const offer = proposed[0];
    assert.ok(offer?.type === 'pool.allocate');
    assert.deepEqual(
      offer.candidates.map((c) => c.hardwareId),
      ['m1', 'm2', 'm3', 'm4'],
    );
    assert.equal(offer.candidates[1]?.spec.tasks[0]?.worker, 'm2', "each candidate's own rendering");
    assert.match(offer.id, /^web-/);
    // A new leader reading the replicated state carries on: one more, then the pool is full.
    const second = keeper(h, () => true, proposed);
    await second.scan();
    assert.deepEqual(h.state.pool('web')?.members, ['m1', 'm2']);
    await second.scan();
    await first.scan();
    assert.equal(proposed.length, 2, 'a full pool is offered nothing');
    const wfM1 = proposedId(proposed, h, 'm1');
    h.is(h.start(wfM1), 'attempt');
    h.finish(wfM1, false);
    await second.scan();
    assert.deepEqual(h.state.pool('web')?.members, ['m2', 'm3'], 'the failed member replaced, and gone');
    assert.equal(first.allocated + second.allocated, 3);
  });
});

/** The workflow a pool.allocate gave `hardwareId`. */
function proposedId(proposed: readonly ControlCommand[], h: LifecycleHarness, hardwareId: string): string {
  for (const c of proposed) {
    if (c.type === 'pool.allocate' && h.state.workflow(c.id)?.hardwareId === hardwareId) return c.id;
  }
  throw new Error(`no workflow on ${hardwareId}`);
}

describe('the pool keeper, spread, spares and image (docs/decisions/0036)', () => {
  it('places one per rack, keeps a spare, renders the image, and replaces a failed member from the spare', async () => {
    const h = new LifecycleHarness();
    const withImage = template
      .replace('name: os', 'name: img')
      .replace(
        'command: ["true"]',
        'command: ["true"]\n        environment:\n          IMG_URL: "{{ pool.image.url }}"',
      );
    h.ok({ type: 'template.put', name: 'img', source: withImage, audit: operator }, 'template');
    h.ok({ type: 'artifact.put', name: 'ubuntu', sha256: 'b'.repeat(64), bytes: 10 }, 'artifact');
    for (const [id, rack] of [
      ['m1', 'a'],
      ['m2', 'a'],
      ['m3', 'b'],
      ['m4', 'b'],
    ] as const) {
      h.machine(id, Number(id.slice(1)));
      h.ok({ type: 'hardware.label', id, set: { rack }, remove: [], audit: operator }, 'hardware');
      h.ok(h.verbCommand(id, 'accept'), 'hardware');
    }
    const create = {
      type: 'pool.create',
      name: 'web',
      selector: 'rack',
      template: 'img',
      size: 2,
      spares: 1,
      spreadBy: 'rack',
      image: 'ubuntu',
      audit: operator,
    } as const;
    h.ok(create, 'pool');
    const proposed: ControlCommand[] = [];
    const k = keeper(h, () => true, proposed);
    await k.scan();
    await k.scan();
    const members = h.state.pool('web')?.members ?? [];
    assert.deepEqual(members, ['m1', 'm3'], 'one per rack');
    const first = proposed[0];
    assert.ok(first?.type === 'pool.allocate');
    assert.equal(
      first.candidates[0]?.spec.tasks[0]?.actions[0]?.env['IMG_URL'],
      'http://192.0.2.1:8080/artifacts/ubuntu',
    );
    await k.scan();
    assert.equal(h.lifecycle('m2').spareOf, 'web', 'the spare kept');
    const wf = (id: string): string => h.state.workflows().find((w) => w.hardwareId === id)?.id ?? '';
    h.is(h.start(wf('m1')), 'attempt');
    h.finish(wf('m1'), false);
    await k.scan();
    assert.deepEqual(h.state.pool('web')?.members, ['m2', 'm3'], 'the spare replaced the failed member');
    await k.scan();
    assert.equal(h.lifecycle('m4').spareOf, 'web', "a new spare in the spare's place");
  });

  it('releases a failed member through the release template in the scan that replaces it from the spare', async () => {
    const h = new LifecycleHarness();
    h.ok({ type: 'template.put', name: 'os', source: template, audit: operator }, 'template');
    const wipe = template.replace('name: os', 'name: wipe').replace('name: install', 'name: wipe');
    h.ok({ type: 'template.put', name: 'wipe', source: wipe, audit: operator }, 'template');
    for (const id of ['m1', 'm2']) {
      h.machine(id, Number(id.slice(1)));
      h.ok(h.verbCommand(id, 'accept'), 'hardware');
    }
    h.ok(
      {
        type: 'pool.create',
        name: 'web',
        selector: '',
        template: 'os',
        releaseTemplate: 'wipe',
        size: 1,
        spares: 1,
        audit: operator,
      },
      'pool',
    );
    const proposed: ControlCommand[] = [];
    const k = keeper(h, () => true, proposed);
    await k.scan();
    await k.scan();
    assert.deepEqual(h.state.pool('web')?.members, ['m1']);
    assert.equal(h.lifecycle('m2').spareOf, 'web');
    const wfM1 = proposedId(proposed, h, 'm1');
    h.is(h.start(wfM1), 'attempt');
    h.finish(wfM1, false);
    proposed.length = 0;
    await k.scan();
    assert.deepEqual(
      proposed.map((c) => (c.type === 'pool.release' ? `${c.type} ${c.hardwareId} ${c.why}` : c.type)),
      ['pool.release m1 failed', 'pool.allocate'],
      'the release and the replacement in one scan',
    );
    assert.deepEqual(h.state.pool('web')?.members, ['m2'], 'refilled from the spare');
    const release = proposed[0];
    assert.ok(release?.type === 'pool.release' && release.release !== undefined);
    assert.equal(release.release.spec.tasks[0]?.actions[0]?.name, 'wipe');
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m1').owner], ['releasing', release.release.id]);
    await k.scan();
    assert.ok(!proposed.slice(2).some((c) => c.type === 'pool.release'), 'released once');
  });
});

describe('the pool keeper under a failure policy (docs/decisions/0040)', () => {
  function fleetOf(n: number, policy: Record<string, unknown>): LifecycleHarness {
    const h = new LifecycleHarness();
    h.ok({ type: 'template.put', name: 'os', source: template, audit: operator }, 'template');
    for (let i = 1; i <= n; i++) {
      h.machine(`m${i}`, i);
      h.ok(
        { type: 'hardware.label', id: `m${i}`, set: { rack: 'a' }, remove: [], audit: operator },
        'hardware',
      );
      h.ok(h.verbCommand(`m${i}`, 'accept'), 'hardware');
    }
    const create = {
      type: 'pool.create',
      name: 'web',
      selector: 'rack=a',
      template: 'os',
      size: 1,
      spares: 0,
      ...policy,
      audit: operator,
    } as ControlCommand;
    h.ok(create, 'pool');
    return h;
  }

  it('retry: installs the failed member again, rendered for it, until the pool holds', async () => {
    const h = fleetOf(3, { onFailure: 'retry', attempts: 2 });
    const proposed: ControlCommand[] = [];
    const k = keeper(h, () => true, proposed);
    await k.scan();
    const first = proposedId(proposed, h, 'm1');
    h.is(h.start(first), 'attempt');
    h.finish(first, false);
    await k.scan();
    const again = proposed[1];
    assert.ok(again?.type === 'pool.allocate' && again.retry === true);
    assert.deepEqual(
      again.candidates.map((c) => [c.hardwareId, c.spec.tasks[0]?.worker]),
      [['m1', 'm1']],
    );
    assert.equal(h.state.workflow(again.id)?.hardwareId, 'm1');
    h.is(h.start(again.id), 'attempt');
    h.finish(again.id, false);
    await k.scan();
    await k.scan();
    assert.equal(proposed.length, 2, 'held after 2 failed in a row: nothing proposed');
    assert.equal(h.state.pool('web')?.failedInARow, 2);
  });

  it('race: offers two lanes for a slot, one when only one machine is left', async () => {
    const h = fleetOf(3, { onFailure: 'race' });
    const proposed: ControlCommand[] = [];
    const k = keeper(h, () => true, proposed);
    await k.scan();
    const race = proposed[0];
    assert.ok(race?.type === 'pool.allocate' && race.race === true);
    assert.deepEqual(h.state.pool('web')?.members, ['m1', 'm2']);
    assert.equal(k.allocated, 2);
    await k.scan();
    assert.equal(proposed.length, 1, 'the two lanes fill the one slot');
    // Both lanes fail: the slot is empty again, and m3 is the one machine left.
    for (const lane of [race.id, `${race.id}.rival`]) {
      h.is(h.start(lane), 'attempt');
      h.finish(lane, false);
    }
    await k.scan();
    const single = proposed[1];
    assert.ok(single?.type === 'pool.allocate' && single.race === undefined);
    assert.equal(h.state.workflow(single.id)?.hardwareId, 'm3');
  });
});
