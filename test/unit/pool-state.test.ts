// Goal: pools as the replicated state applies them (docs/decisions/0035): pool.create refuses a
// selector that does not parse, a template that does not exist, a size below 0, a bad name, a
// repeat, each changing nothing; pool.allocate takes one offered machine for a free slot and
// joins it to the pool in the same entry, and is refused once the slots are filled (never two for
// one slot, whatever the leader proposes); a failed member is replaced and leaves; deleting a
// member machine is refused naming the pool; deleting a pool is refused while a member is
// provisioning; below state version 3 pool commands are refused. The same log applied on another
// state gives the same bytes, and the pools survive snapshot and restore.
// Method: ControlState through apply() (test/support/lifecycle-harness.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ControlCommand } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { LifecycleHarness, machineInput, operator, specFor } from '../support/lifecycle-harness.js';

/** Machines m1..m4 ready in rack a, m5 ready in rack b. */
function fleet(): LifecycleHarness {
  const h = new LifecycleHarness();
  for (let n = 1; n <= 5; n++) {
    const id = `m${n}`;
    h.machine(id, n);
    h.ok(
      { type: 'hardware.label', id, set: { rack: n === 5 ? 'b' : 'a' }, remove: [], audit: operator },
      'hardware',
    );
    h.ok(h.verbCommand(id, 'accept'), 'hardware');
  }
  return h;
}

function createPool(size: number, selector = 'rack==a'): ControlCommand {
  return { type: 'pool.create', name: 'web', selector, template: 'os', size, spares: 0, audit: operator };
}

function allocateFor(h: LifecycleHarness, id: string, offer: readonly string[]): ControlCommand {
  return {
    type: 'pool.allocate',
    pool: 'web',
    id,
    templateVersion: h.state.template('os')?.version ?? 0,
    hardwareMap: {},
    candidates: offer.map((hardwareId) => ({ hardwareId, spec: specFor(hardwareId) })),
  };
}

describe('pool commands', () => {
  it('bad input is refused and changes nothing', () => {
    const h = fleet();
    h.refused(createPool(1, 'rack=='), 'E_INVALID', /^selector: /);
    h.refused({ ...createPool(1), template: 'nope' } as ControlCommand, 'E_NOT_FOUND', /template "nope"/);
    h.refused(createPool(-1), 'E_INVALID', /size must be a whole number from 0/);
    h.refused({ ...createPool(1), name: 'Web!' } as ControlCommand, 'E_INVALID', /pool name/);
    h.refused({ type: 'pool.scale', name: 'web', size: 2 }, 'E_NOT_FOUND');
    const pool = h.ok(createPool(2), 'pool').pool;
    assert.deepEqual([pool.selector, pool.size, pool.members], ['rack=a', 2, []]);
    h.refused(createPool(2), 'E_EXISTS');
    h.refused({ type: 'pool.scale', name: 'web', size: -3 }, 'E_INVALID');
  });

  it('fills slots one machine each, never past its size, and guards its members', () => {
    const h = fleet();
    h.ok(createPool(2), 'pool');
    const first = h.ok(allocateFor(h, 'web-1', ['m5', 'm1', 'm2']), 'pool').pool;
    assert.deepEqual(first.members, ['m1'], 'm5 is in rack b');
    assert.equal(h.state.workflow('web-1')?.hardwareId, 'm1');
    // A second leader's proposal with the same offer takes the next machine, not the same slot twice.
    assert.deepEqual(h.ok(allocateFor(h, 'web-2', ['m1', 'm2']), 'pool').pool.members, ['m1', 'm2']);
    h.refused(
      allocateFor(h, 'web-3', ['m3']),
      'E_CONFLICT',
      /has 2 machines provisioning or deployed, its size 2/,
    );
    h.refused({ type: 'hardware.delete', id: 'm1' }, 'E_CONFLICT', /belongs to pool "web"/);
    h.refused({ type: 'pool.delete', name: 'web' }, 'E_CONFLICT', /provisioning \(m1, m2\)/);
    h.ok(
      { type: 'attempt.start', workflowId: 'web-1', actionIndex: 0, attempt: 1, workerId: 'm1' },
      'attempt',
    );
    h.finish('web-1', true);
    h.ok(
      { type: 'attempt.start', workflowId: 'web-2', actionIndex: 0, attempt: 1, workerId: 'm2' },
      'attempt',
    );
    h.finish('web-2', false);
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m2').state], ['deployed', 'failed']);
    // The failed member's slot is free again: its replacement joins, and the failed one leaves.
    const replaced = h.ok(allocateFor(h, 'web-3', ['m2', 'm3']), 'pool').pool;
    assert.deepEqual(replaced.members, ['m1', 'm3']);
    h.ok({ type: 'pool.scale', name: 'web', size: 3 }, 'pool');
    h.ok(allocateFor(h, 'web-4', ['m4']), 'pool');
    h.refused(allocateFor(h, 'web-5', ['m5']), 'E_CONFLICT');
  });

  it('the same log gives the same state elsewhere, and pools survive snapshot and restore', () => {
    const h = fleet();
    h.ok(createPool(2), 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1', 'm2']), 'pool');
    const replay = new ControlState();
    for (const a of h.applied) replay.apply(a.index, a.nowMs, a.command);
    assert.deepEqual(replay.snapshot(), h.state.snapshot());
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.pools(), h.state.pools());
    assert.deepEqual(copy.pool('web')?.members, ['m1']);
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    // The restored state goes on from the replicated pool: the next slot, then full.
    copy.apply(h.index + 1, h.nowMs, allocateFor(h, 'web-2', ['m1', 'm2']));
    assert.deepEqual(copy.pool('web')?.members, ['m1', 'm2']);
    const full = copy.apply(h.index + 2, h.nowMs, allocateFor(h, 'web-3', ['m3']));
    assert.equal(full.type === 'error' && full.code, 'E_CONFLICT');
  });

  it('a pool whose members are all deployed can be deleted; its machines stay deployed', () => {
    const h = fleet();
    h.ok(createPool(1), 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    h.ok(
      { type: 'attempt.start', workflowId: 'web-1', actionIndex: 0, attempt: 1, workerId: 'm1' },
      'attempt',
    );
    h.finish('web-1', true);
    h.ok({ type: 'pool.delete', name: 'web' }, 'deleted');
    assert.equal(h.lifecycle('m1').state, 'deployed');
    assert.deepEqual(h.state.pools(), []);
  });

  it('is refused below state version 3', () => {
    const h = new LifecycleHarness(2);
    const res = h.run(createPool(1));
    assert.equal(res.type, 'error');
    assert.deepEqual(h.state.pools(), []);
  });
});

// Goal (docs/decisions/0036): at apply, a stale offer cannot break the spread; a spare is the
// pool's alone; a release runs the pool's release template as a workflow owning the machine from
// releasing to ready; a taint's release is refused past the budget; a deleted pool with a release
// template goes once its members are released; an image must be registered.
describe('pool placement, spares, releases and taints at apply', () => {
  /** m1..m5 of fleet(); a pool "web" over both racks, spread by rack. */
  function spread(h: LifecycleHarness, extra: Record<string, unknown> = {}): void {
    h.ok({ ...createPool(2, 'rack'), spreadBy: 'rack', ...extra } as ControlCommand, 'pool');
  }

  function deploy(h: LifecycleHarness, wf: string): void {
    h.is(h.start(wf), 'attempt');
    h.finish(wf, true);
  }

  it('refuses an offer that would put two in one rack while the other has a machine', () => {
    const h = fleet();
    spread(h);
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    h.refused(allocateFor(h, 'web-2', ['m2', 'm3']), 'E_VERSION', /two in one rack value while b has fewer/);
    assert.deepEqual(h.ok(allocateFor(h, 'web-3', ['m2', 'm5']), 'pool').pool.members, ['m1', 'm5']);
  });

  it('keeps a spare for the pool alone, and the pool takes it', () => {
    const h = fleet();
    h.ok({ ...createPool(1, 'rack=b'), spares: 1 } as ControlCommand, 'pool');
    h.refused(
      { type: 'pool.reserve', pool: 'web', hardwareId: 'm1' },
      'E_CONFLICT',
      /not a ready, free machine/,
    );
    h.ok({ type: 'pool.reserve', pool: 'web', hardwareId: 'm5' }, 'pool');
    assert.equal(h.lifecycle('m5').spareOf, 'web');
    h.refused({ type: 'pool.reserve', pool: 'web', hardwareId: 'm5' }, 'E_CONFLICT');
    // No other allocation takes it: a workflow by selector finds none ready.
    h.refused(
      {
        type: 'workflow.allocate',
        id: 'other',
        template: 'os',
        templateVersion: h.state.template('os')?.version ?? 0,
        hardwareMap: {},
        selector: 'rack=b',
        candidates: [{ hardwareId: 'm5', spec: specFor('m5') }],
      },
      'E_CONFLICT',
      /not ready \(1 spare\)/,
    );
    // Relabelled, a spare is freed (its pool keeps it again if it still matches).
    h.ok({ type: 'hardware.label', id: 'm5', set: { disk: 'new' }, remove: [], audit: operator }, 'hardware');
    assert.equal(h.lifecycle('m5').spareOf, undefined);
    h.ok({ type: 'pool.reserve', pool: 'web', hardwareId: 'm5' }, 'pool');
    assert.deepEqual(h.ok(allocateFor(h, 'web-1', ['m5']), 'pool').pool.members, ['m5']);
    assert.equal(h.lifecycle('m5').spareOf, undefined, 'taken: a spare no more');
  });

  it('releases a member through the release template, from releasing to ready', () => {
    const h = fleet();
    h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
    h.ok({ ...createPool(1), releaseTemplate: 'wipe' } as ControlCommand, 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    deploy(h, 'web-1');
    const release = {
      type: 'pool.release',
      pool: 'web',
      hardwareId: 'm1',
      why: 'surplus',
      release: { id: 'web-r1', templateVersion: h.state.template('wipe')?.version ?? 0, spec: specFor('m1') },
    } as const;
    h.refused(release, 'E_CONFLICT', /none is surplus/);
    h.refused(
      { type: 'pool.release', pool: 'web', hardwareId: 'm1', why: 'surplus' },
      'E_INVALID',
      /needs its workflow/,
    );
    h.ok({ type: 'pool.scale', name: 'web', size: 0 }, 'pool');
    assert.deepEqual(h.ok(release, 'pool').pool.members, []);
    assert.deepEqual([h.lifecycle('m1').state, h.lifecycle('m1').owner], ['releasing', 'web-r1']);
    deploy(h, 'web-r1');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.deepEqual(
      h
        .lifecycle('m1')
        .history.slice(-2)
        .map((e) => [e.from, e.to, e.trigger]),
      [
        ['deployed', 'releasing', 'release'],
        ['releasing', 'ready', 'released'],
      ],
    );
  });

  it('a member with a BMC is booted from the network for its release, and stays in the boot OS', () => {
    const h = fleet();
    h.ok(
      {
        type: 'hardware.put',
        hardware: { ...machineInput('m1', 1), bmc: { address: 'ipmi://10.1.0.1:623' } },
        workerTokenSha256: 'a'.repeat(64),
        audit: operator,
      },
      'hardware',
    );
    h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
    h.ok({ ...createPool(1), releaseTemplate: 'wipe' } as ControlCommand, 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    deploy(h, 'web-1');
    assert.equal(h.state.hardware('m1')?.netboot.allowPXE, false, 'installed: PXE off');
    h.ok({ type: 'pool.scale', name: 'web', size: 0 }, 'pool');
    const wipe = {
      id: 'web-r1',
      templateVersion: h.state.template('wipe')?.version ?? 0,
      spec: specFor('m1'),
    };
    h.ok({ type: 'pool.release', pool: 'web', hardwareId: 'm1', why: 'surplus', release: wipe }, 'pool');
    assert.equal(h.state.hardware('m1')?.netboot.allowPXE, true, 'PXE on again for the release');
    assert.deepEqual(
      h.state.powerJobs('m1').map((j) => [j.id, j.op]),
      [['web-r1-netboot', 'netboot']],
    );
    deploy(h, 'web-r1');
    assert.equal(h.lifecycle('m1').state, 'ready');
    assert.equal(h.state.hardware('m1')?.netboot.allowPXE, true, 'released: still in the boot OS');
    assert.deepEqual(
      h.state.powerJobs('m1').map((j) => j.op),
      ['netboot'],
      'no disk boot after a release',
    );
  });

  it('a taint releases within maxUnavailable, and a deleted pool goes once its members are released', () => {
    const h = fleet();
    h.ok({ ...createPool(2), maxUnavailable: 1 } as ControlCommand, 'pool');
    h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
    h.ok(allocateFor(h, 'web-2', ['m2']), 'pool');
    deploy(h, 'web-1');
    deploy(h, 'web-2');
    assert.deepEqual(h.ok({ type: 'pool.taint', name: 'web' }, 'pool').pool.tainted, ['m1', 'm2']);
    const taint = (id: string): ControlCommand => ({
      type: 'pool.release',
      pool: 'web',
      hardwareId: id,
      why: 'taint',
    });
    h.ok(taint('m1'), 'pool');
    assert.equal(h.lifecycle('m1').state, 'ready', 'no release template: released at once');
    h.refused(taint('m2'), 'E_CONFLICT', /fewer than its size 2 less maxUnavailable 1/);
    h.ok(allocateFor(h, 'web-3', ['m3']), 'pool');
    deploy(h, 'web-3');
    h.ok(taint('m2'), 'pool');
    assert.deepEqual(h.state.pool('web')?.members, ['m3']);
    // Delete with a release template: deleting until its member has been released.
    h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
    h.ok({ ...createPool(1), name: 'db', releaseTemplate: 'wipe' } as ControlCommand, 'pool');
    h.ok({ ...allocateFor(h, 'db-1', ['m4']), pool: 'db' } as ControlCommand, 'pool');
    deploy(h, 'db-1');
    assert.equal(h.ok({ type: 'pool.delete', name: 'db' }, 'pool').pool.deleting, true);
    h.refused(
      { ...allocateFor(h, 'db-2', ['m2']), pool: 'db' } as ControlCommand,
      'E_CONFLICT',
      /being deleted/,
    );
    const wipe = {
      id: 'db-r1',
      templateVersion: h.state.template('wipe')?.version ?? 0,
      spec: specFor('m4'),
    };
    h.ok({ type: 'pool.release', pool: 'db', hardwareId: 'm4', why: 'delete', release: wipe }, 'deleted');
    assert.equal(h.state.pool('db'), undefined);
    assert.equal(h.lifecycle('m4').state, 'releasing');
  });

  describe('a failed member with a release template (issue 23 item 5, 0036)', () => {
    function failingPool(h: LifecycleHarness): void {
      h.ok({ type: 'template.put', name: 'wipe', source: 'version: "0.1"\nname: wipe\n' }, 'template');
      h.ok({ ...createPool(1), releaseTemplate: 'wipe' } as ControlCommand, 'pool');
    }

    function failedRelease(h: LifecycleHarness, hardwareId: string, id: string): ControlCommand {
      const templateVersion = h.state.template('wipe')?.version ?? 0;
      return {
        type: 'pool.release',
        pool: 'web',
        hardwareId,
        why: 'failed',
        release: { id, templateVersion, spec: specFor(hardwareId) },
      };
    }

    const moves = (h: LifecycleHarness, id: string, n: number): string[][] =>
      h
        .lifecycle(id)
        .history.slice(-n)
        .map((e) => [e.from ?? '', e.to, e.trigger]);

    it('is failed at once, replaced without waiting, released, and ends failed with its own reason', () => {
      const h = fleet();
      failingPool(h);
      h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
      h.refused(failedRelease(h, 'm1', 'web-r0'), 'E_CONFLICT', /one workflow at a time/);
      h.is(h.start('web-1'), 'attempt');
      h.finish('web-1', false);
      const failed = h.lifecycle('m1');
      assert.equal(failed.state, 'failed');
      assert.match(
        failed.reason ?? '',
        /^workflow web-1 failed: .*; released through pool web's release template next$/,
      );
      assert.equal(failed.afterRelease?.pool, 'web');
      assert.equal(failed.failures?.length, 1);
      const original = failed.afterRelease?.reason ?? '';
      const step = failed.step;
      assert.match(original, /^workflow web-1 failed: /);
      // The slot is refilled before the release: the failed member leaves the members.
      assert.deepEqual(h.ok(allocateFor(h, 'web-2', ['m2']), 'pool').pool.members, ['m2']);
      // The same log gives the same state elsewhere, and the mark survives snapshot and restore.
      const replay = new ControlState();
      for (const a of h.applied) replay.apply(a.index, a.nowMs, a.command);
      assert.deepEqual(replay.snapshot(), h.state.snapshot());
      const copy = new ControlState();
      copy.restore(h.state.snapshot());
      assert.deepEqual(copy.hardware('m1')?.lifecycle, h.lifecycle('m1'));
      h.ok(failedRelease(h, 'm1', 'web-r1'), 'pool');
      const releasing = h.lifecycle('m1');
      assert.deepEqual([releasing.state, releasing.owner], ['releasing', 'web-r1']);
      assert.ok(releasing.deadlineMs !== undefined, 'the releasing deadline');
      assert.match(releasing.reason ?? '', /of pool web's failed member/);
      h.refused(failedRelease(h, 'm1', 'web-r2'), 'E_CONFLICT', /one workflow at a time/);
      // A snapshot taken while the release workflow owns the machine restores.
      const during = new ControlState();
      during.restore(h.state.snapshot());
      assert.deepEqual(during.hardware('m1')?.lifecycle, releasing);
      deploy(h, 'web-r1');
      const ended = h.lifecycle('m1');
      assert.equal(ended.state, 'failed', 'failed, not ready');
      assert.equal(ended.reason, `${original} (released through workflow web-r1)`);
      assert.equal(ended.step, step);
      assert.equal(ended.afterRelease, undefined);
      assert.equal(ended.failures?.length, 1, 'the release is no second failure');
      assert.deepEqual(moves(h, 'm1', 3), [
        ['provisioning', 'failed', 'fail'],
        ['failed', 'releasing', 'release'],
        ['releasing', 'failed', 'released'],
      ]);
      h.refused(failedRelease(h, 'm1', 'web-r3'), 'E_CONFLICT', /no member of pool "web"/);
    });

    it('a failure that reaches the quarantine count ends quarantined after the release', () => {
      const h = fleet();
      failingPool(h);
      // A first failure on m1 outside the pool; released by hand, it is ready and keeps its count.
      h.provision('w0', 'm1', false);
      h.ok(h.verbCommand('m1', 'release'), 'hardware');
      assert.equal(h.lifecycle('m1').state, 'ready');
      h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
      h.is(h.start('web-1'), 'attempt');
      h.finish('web-1', false);
      assert.equal(h.lifecycle('m1').state, 'quarantined');
      assert.equal(h.lifecycle('m1').afterRelease?.state, 'quarantined');
      h.ok(failedRelease(h, 'm1', 'web-r1'), 'pool');
      deploy(h, 'web-r1');
      const ended = h.lifecycle('m1');
      assert.equal(ended.state, 'quarantined');
      assert.match(
        ended.reason ?? '',
        /^failed 2 times within 24h; last: workflow web-1 failed: .* \(released through workflow web-r1\)$/,
      );
      assert.equal(ended.failures?.length, 2);
      assert.deepEqual(moves(h, 'm1', 2), [
        ['quarantined', 'releasing', 'release'],
        ['releasing', 'quarantined', 'released'],
      ]);
    });

    it('a release that fails too leaves the machine failed, naming both', () => {
      const h = fleet();
      failingPool(h);
      h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
      h.is(h.start('web-1'), 'attempt');
      h.finish('web-1', false);
      h.ok(failedRelease(h, 'm1', 'web-r1'), 'pool');
      h.is(h.start('web-r1'), 'attempt');
      h.finish('web-r1', false);
      const ended = h.lifecycle('m1');
      assert.equal(ended.state, 'failed');
      assert.match(
        ended.reason ?? '',
        /^release workflow web-r1 failed: .*; before it: workflow web-1 failed: /,
      );
      assert.equal(ended.failures?.length, 1);
      assert.deepEqual(moves(h, 'm1', 1), [['releasing', 'failed', 'fail']]);
    });

    it('a provisioning deadline that passes is such a failure; a release deadline names both', () => {
      const h = fleet();
      failingPool(h);
      h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
      h.is(h.expire('m1'), 'hardware');
      assert.equal(h.state.workflow('web-1')?.state, 'TIMEOUT');
      assert.deepEqual(h.lifecycle('m1').afterRelease, {
        pool: 'web',
        state: 'failed',
        reason: 'deadline passed in provisioning',
      });
      h.ok(failedRelease(h, 'm1', 'web-r1'), 'pool');
      h.is(h.expire('m1'), 'hardware');
      assert.equal(h.state.workflow('web-r1')?.state, 'TIMEOUT');
      const ended = h.lifecycle('m1');
      assert.equal(ended.state, 'failed');
      assert.equal(ended.reason, 'deadline passed in releasing; before it: deadline passed in provisioning');
      assert.equal(ended.afterRelease, undefined);
      assert.equal(ended.failures?.length, 1);
    });

    it('without a release template, a failed member is failed as before', () => {
      const h = fleet();
      h.ok(createPool(1), 'pool');
      h.ok(allocateFor(h, 'web-1', ['m1']), 'pool');
      h.is(h.start('web-1'), 'attempt');
      h.finish('web-1', false);
      assert.equal(h.lifecycle('m1').state, 'failed');
      assert.equal(h.lifecycle('m1').afterRelease, undefined);
      assert.match(h.lifecycle('m1').reason ?? '', /^workflow web-1 failed: [^;]*$/);
      h.refused(
        { type: 'pool.release', pool: 'web', hardwareId: 'm1', why: 'failed' },
        'E_CONFLICT',
        /no failed member/,
      );
    });
  });

  it('an image must be a registered artifact', () => {
    const h = fleet();
    h.refused(
      { ...createPool(1), image: 'ubuntu' } as ControlCommand,
      'E_NOT_FOUND',
      /artifact "ubuntu" is not registered/,
    );
    h.ok({ type: 'artifact.put', name: 'ubuntu', sha256: 'a'.repeat(64), bytes: 10 }, 'artifact');
    assert.equal(h.ok({ ...createPool(1), image: 'ubuntu' } as ControlCommand, 'pool').pool.image, 'ubuntu');
  });
});
