// Goal: prove the replicated half of node drain (docs/decisions/0022-node-drain.md) and the
// CLI's report. member.drain needs state version 2 (refused by the gate before then); it checks
// the id's form and the bound on the set, drains and undrains idempotently, calls the hook only
// on a change, and is audited. The drained set goes into the snapshot only when not empty, in
// format 6 only: a snapshot without it reads as none drained, a state without drained members
// keeps its bytes, and one that breaks the rules (unsorted, empty list, older format) is refused
// on restore, changing nothing. The CLI's report says what moved and whether the drain is complete;
// --drain-grace and --timeout take durations.
// Method: ControlState through apply() with explicit leader stamps (through the codec, as the log
// carries commands); snapshots compared byte for byte; the CLI's pure report functions on Status
// answers built by hand.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { describeDrain, drainComplete, drainReport } from '../../src/cli/commands/node.js';
import { duration, durationSeconds } from '../../src/cli/flags.js';
import { UsageError } from '../../src/cli/output.js';
import type { StatusResponse } from '../../src/gen/kv.js';
import { Role } from '../../src/gen/kv.js';
import { DecodeError } from '../../src/state/binary.js';
import type { AuditTag } from '../../src/state/control/audit-log.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { drainedAfter, drainedSetProblem } from '../../src/state/control/drained-members.js';
import { memberIdProblem } from '../../src/model/member-id.js';
import { ShapeError } from '../../src/state/control/shape.js';
import { writeSnapshot } from '../../src/state/control/snapshot.js';
import { drainedMembersMax } from '../../src/model/limits.js';
import { clusterVersionRefusal, controlCommandVersion } from '../../src/state/versions.js';

const admin: AuditTag = { user: 'root', role: 'admin', address: '127.0.0.1:1', method: 'Control/NodeDrain' };

class Harness {
  readonly state = new ControlState();
  index = 0;
  drainChanges = 0;

  constructor(version = 2) {
    this.state.changes.on('drain', () => {
      this.drainChanges++;
    });
    if (version >= 2) this.run({ type: 'cluster.version', version });
  }

  run(command: ControlCommand): ControlResult {
    this.index += 1;
    return this.state.apply(this.index, 1_000_000, decodeControlCommand(encodeControlCommand(command)));
  }

  drain(id: string, drained = true): ControlResult {
    return this.run({ type: 'member.drain', id, drained, audit: admin });
  }
}

function snapshotJson(state: ControlState): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(state.snapshot())) as Record<string, unknown>;
}

describe('member.drain in the replicated state', () => {
  it('needs state version 2: refused by the proposer check and by apply at version 1', () => {
    const command: ControlCommand = { type: 'member.drain', id: 'n1', drained: true };
    assert.equal(controlCommandVersion(command), 2);
    assert.match(clusterVersionRefusal(command, 1) ?? '', /member\.drain needs cluster version 2/);
    assert.equal(clusterVersionRefusal(command, 2), undefined);
    const h = new Harness(1);
    const r = h.drain('n1');
    assert.equal(r.type, 'error');
    assert.deepEqual(h.state.drainedMembers, []);
    assert.equal(h.drainChanges, 0);
  });

  it('drains and undrains, idempotently, keeping the set sorted; the hook hears changes only', () => {
    const h = new Harness();
    assert.deepEqual(h.drain('n3'), { type: 'drainedMembers', ids: ['n3'] });
    assert.deepEqual(h.drain('n1'), { type: 'drainedMembers', ids: ['n1', 'n3'] });
    assert.equal(h.drainChanges, 2);
    assert.deepEqual(h.drain('n1'), { type: 'drainedMembers', ids: ['n1', 'n3'] }, 'again: no change');
    assert.equal(h.drainChanges, 2);
    assert.ok(h.state.isDrained('n1') && h.state.isDrained('n3') && !h.state.isDrained('n2'));
    assert.deepEqual(
      h.drain('n2', false),
      { type: 'drainedMembers', ids: ['n1', 'n3'] },
      'not drained: no change',
    );
    assert.equal(h.drainChanges, 2);
    assert.deepEqual(h.drain('n1', false), { type: 'drainedMembers', ids: ['n3'] });
    assert.equal(h.drainChanges, 3);
    assert.ok(!h.state.isDrained('n1'));
  });

  it('refuses a malformed id and a set past its bound, changing nothing; records each in the trail', () => {
    const h = new Harness();
    for (const id of ['', 'has space', '-lead', 'x'.repeat(64)]) {
      const r = h.drain(id);
      assert.equal(r.type, 'error', id);
      assert.match(r.type === 'error' ? r.message : '', /member id .* must be 1-63 letters/);
    }
    assert.deepEqual(h.state.drainedMembers, []);
    for (let i = 0; i < drainedMembersMax; i++) h.drain(`m${String(i).padStart(3, '0')}`);
    const past = h.drain('zz');
    assert.equal(past.type, 'error');
    assert.match(past.type === 'error' ? past.message : '', /undrain one first/);
    assert.equal(h.state.drainedMembers.length, drainedMembersMax);
    const trail = h.state.auditTrail({ limit: 3 }).entries;
    assert.equal(trail[0]?.kind, 'member.drain');
    assert.equal(trail[0]?.target, 'zz (drain)');
    assert.ok(trail[0]?.error !== undefined, 'the refusal is in the trail');
  });

  it('the pure rules: form, bound, sorted set', () => {
    assert.equal(memberIdProblem('n1'), undefined);
    assert.match(memberIdProblem('a/b') ?? '', /must be 1-63/);
    assert.deepEqual(drainedAfter(['b'], 'a', true), ['a', 'b']);
    assert.deepEqual(drainedAfter(['a', 'b'], 'a', false), ['b']);
    assert.equal(drainedSetProblem(['a', 'b']), undefined);
    assert.match(drainedSetProblem(['b', 'a']) ?? '', /out of order/);
    assert.match(drainedSetProblem(['a', 'a']) ?? '', /out of order or repeated/);
    assert.match(drainedSetProblem(['a b']) ?? '', /must be 1-63/);
  });
});

describe('drained members in the snapshot', () => {
  it('are written last in format 6 only when some member is drained, and restore', () => {
    const h = new Harness();
    const without = h.state.snapshot();
    assert.ok(!('drainedMembers' in snapshotJson(h.state)));
    h.drain('n2');
    const json = snapshotJson(h.state);
    assert.equal(json['format'], 6);
    assert.deepEqual(json['drainedMembers'], ['n2']);
    assert.equal(Object.keys(json).at(-1), 'drainedMembers');
    const copy = new ControlState();
    copy.restore(h.state.snapshot());
    assert.deepEqual(copy.drainedMembers, ['n2']);
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    // Undrained again: the field is gone (only the index and the audit trail moved on).
    h.drain('n2', false);
    const again = snapshotJson(h.state);
    const before = JSON.parse(new TextDecoder().decode(without)) as Record<string, unknown>;
    assert.ok(!('drainedMembers' in again) && !('drainedMembers' in before));
    assert.deepEqual(
      Object.keys(again).filter((k) => k !== 'audit'),
      Object.keys(before),
    );
  });

  it('a snapshot without the field restores with none drained', () => {
    const h = new Harness();
    h.drain('n1');
    const target = new ControlState();
    target.restore(h.state.snapshot());
    target.restore(new Harness().state.snapshot());
    assert.deepEqual(target.drainedMembers, []);
  });

  it('refuses drained members at version 1, unsorted, or as an empty list, changing nothing', () => {
    const image = new Harness(1).state.captureImage();
    assert.throws(() => writeSnapshot({ ...image, drainedMembers: ['n1'] }), ShapeError);
    const v2 = new Harness();
    v2.drain('n1');
    const good = new TextDecoder().decode(v2.state.snapshot());
    const target = new ControlState();
    const bad = [
      good.replace('"drainedMembers":["n1"]', '"drainedMembers":["n2","n1"]'),
      good.replace('"drainedMembers":["n1"]', '"drainedMembers":[]'),
      good.replace('"drainedMembers":["n1"]', '"drainedMembers":["bad id"]'),
      good.replace('"format":6', '"format":5').replace(/,"clusterVersion":2/, ''),
    ];
    for (const text of bad) {
      assert.notEqual(text, good);
      assert.throws(() => target.restore(new TextEncoder().encode(text)), DecodeError, text.slice(-80));
      assert.deepEqual(target.drainedMembers, []);
    }
  });
});

function status(fields: Partial<StatusResponse>): StatusResponse {
  return {
    id: 'n2',
    leader: 'n1',
    term: 3,
    commit: 10,
    applied: 10,
    role: Role.ROLE_FOLLOWER,
    members: [],
    build: '0.2.0',
    stateVersion: 2,
    clusterVersion: 2,
    stopped: '',
    leaderTransferee: '',
    stateDigest: '',
    drained: false,
    workerStreams: 0,
    bootServices: [],
    ...fields,
  };
}

describe("the CLI's drain report", () => {
  it('is complete once the node is drained, leads no more and holds no worker stream', () => {
    assert.equal(drainComplete(undefined), false);
    assert.equal(drainComplete(status({ drained: false })), false);
    assert.equal(drainComplete(status({ drained: true, role: Role.ROLE_LEADER, leader: 'n2' })), false);
    assert.equal(drainComplete(status({ drained: true, workerStreams: 1 })), false);
    assert.equal(drainComplete(status({ drained: true, leader: '' })), false, 'the election is under way');
    assert.equal(drainComplete(status({ drained: true })), true);
  });

  it('says where leadership went and how many streams moved', () => {
    const r = drainReport(
      'n2',
      status({ role: Role.ROLE_LEADER, leader: 'n2', workerStreams: 3 }),
      status({ drained: true, leader: 'n3' }),
      1500,
      '',
    );
    assert.deepEqual(
      { ...r },
      {
        id: 'n2',
        drained: true,
        complete: true,
        wasLeader: true,
        leaderBefore: 'n2',
        leaderAfter: 'n3',
        workerStreamsBefore: 3,
        workerStreamsMoved: 3,
        workerStreamsLeft: 0,
        waitedMs: 1500,
        unreachable: '',
      },
    );
    const text = describeDrain(r);
    assert.match(text, /^node n2: drained$/m);
    assert.match(text, /leadership: moved from n2 to n3/);
    assert.match(text, /worker streams: 3 moved, 0 left \(after 1\.5 s\)/);
  });

  it('an incomplete drain says what was left, and why the state is unknown', () => {
    const left = drainReport(
      'n2',
      status({ workerStreams: 2 }),
      status({ drained: true, workerStreams: 1 }),
      60_000,
      '',
    );
    assert.equal(left.complete, false);
    assert.equal(left.workerStreamsMoved, 1);
    assert.match(describeDrain(left), /drained \(not complete\)[\s\S]*n2 did not lead[\s\S]*1 moved, 1 left/);
    const gone = drainReport('n2', undefined, undefined, 5000, 'no status from n2 within 5000 ms');
    assert.equal(gone.complete, false);
    assert.match(describeDrain(gone), /status: no status from n2/);
    const stuck = drainReport(
      'n2',
      status({ role: Role.ROLE_LEADER, leader: 'n2' }),
      status({ drained: true, role: Role.ROLE_LEADER, leader: 'n2' }),
      1,
      '',
    );
    assert.match(describeDrain(stuck), /leadership: still on n2/);
  });

  it('durations: 0, ms, s, m, h, d, bare numbers in the unit the help names; anything else is a usage error naming the flag', () => {
    assert.equal(duration('0', '--drain-grace', 'ms'), 0);
    assert.equal(duration('500ms', '--drain-grace', 'ms'), 500);
    assert.equal(duration('5s', '--drain-grace', 'ms'), 5000);
    assert.equal(duration('2m', '--drain-grace', 'ms'), 120_000);
    assert.equal(duration('1h', '--drain-grace', 'ms'), 3_600_000);
    assert.equal(duration('1d', '--drain-grace', 'ms'), 86_400_000);
    assert.equal(duration('5', '--drain-grace', 'ms'), 5, 'bare: milliseconds');
    assert.equal(duration('5', '--dhcp-lease-time', 's'), 5000, 'bare: seconds');
    assert.equal(durationSeconds('2m', '--dhcp-lease-time'), 120);
    assert.throws(
      () => durationSeconds('1500ms', '--dhcp-lease-time'),
      /--dhcp-lease-time must be whole seconds/,
    );
    assert.throws(() => duration('5x', '--wait', 'ms'), /a bare number is milliseconds\), got "5x"/);
    for (const bad of ['', '-1s', '1.5s', '5 s', 's', '1e3']) {
      assert.throws(
        () => duration(bad, '--drain-grace', 'ms'),
        (e: unknown) => e instanceof UsageError && /--drain-grace/.test(e.message),
      );
    }
  });
});
