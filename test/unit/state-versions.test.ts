// Goal: the version gates (docs/decisions/0019-version-gates.md). Every command of builds 0.1.x
// keeps its bytes (control payload version 1); an entry that needs a state version above this
// build's stops apply with EntryTooNewError and changes nothing; cluster.version raises the
// effective version and never lowers it, and snapshots keep the format 0.1.x reads until it is
// raised. The leader raises it to the lowest version every voter supports; `upgrade check`
// says whether a node may be restarted from each member's Status.
// Method: ReplicatedState and ControlState through encoded commands, as the raft node applies them; the
// pure deciders of src/node/cluster-version-keeper.ts and src/cli/upgrade-check.ts on tables.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { versionAllVotersApply } from '../../src/node/cluster-version-keeper.js';
import { upgradeChecks, versionSummary, type MemberReport } from '../../src/cli/upgrade-check.js';
import { decodeResult, encodeCommand } from '../../src/state/store-command.js';
import type { ControlCommand } from '../../src/state/control/commands.js';
import type { BuiltinAction } from '../../src/model/records.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { ReplicatedState } from '../../src/state/replicated-state.js';
import {
  buildVersion,
  clusterVersionRefusal,
  controlCommandVersion,
  EntryTooNewError,
  stateVersionBaseline,
  stateVersionOfThisBuild,
} from '../../src/state/versions.js';

const control = (command: ControlCommand, stampMs = 1_000): Uint8Array =>
  encodeCommand({ type: 'control', stampMs, command });

/** The control payload version byte of an encoded command without a session (see command.ts). */
function payloadVersionOf(bytes: Uint8Array): number {
  // u8 codec version | u8 type | uvarint stampMs (2 bytes for 1000) | u8 flags | u8 payload version
  return bytes[5]!;
}

function formatOf(snapshot: Uint8Array): number {
  return (JSON.parse(new TextDecoder().decode(snapshot)) as { format: number }).format;
}

describe('state versions', () => {
  it('this build advertises the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    assert.equal(buildVersion, pkg.version);
  });

  it('commands of builds 0.1.x keep payload version 1; cluster.version N is written at N', () => {
    const old: ControlCommand[] = [
      { type: 'workflow.delete', id: 'w1' },
      { type: 'token.delete', name: 't' },
      { type: 'audit.retention', entries: 10, days: 0 },
    ];
    for (const c of old) {
      assert.equal(controlCommandVersion(c), stateVersionBaseline, c.type);
      assert.equal(payloadVersionOf(control(c)), 1, c.type);
    }
    assert.equal(payloadVersionOf(control({ type: 'cluster.version', version: 2 })), 2);
    assert.equal(payloadVersionOf(control({ type: 'cluster.version', version: 7 })), 7);
  });

  it('an entry needing a newer state version stops apply and changes nothing', () => {
    const store = new ReplicatedState();
    store.apply(
      1,
      encodeCommand({ type: 'put', stampMs: 1_000, ns: 'kv', key: 'a', value: Uint8Array.of(1) }),
    );
    const before = store.snapshot();
    const tooNew = control({ type: 'cluster.version', version: stateVersionOfThisBuild + 1 });
    assert.throws(
      () => store.apply(2, tooNew),
      (e: unknown) =>
        e instanceof EntryTooNewError &&
        e.needs === stateVersionOfThisBuild + 1 &&
        e.message.includes(
          `needs state version ${stateVersionOfThisBuild + 1}, but this build (0.2.0) applies up to ${stateVersionOfThisBuild}: run a newer build`,
        ),
    );
    assert.equal(store.appliedIndex, 1);
    assert.deepEqual(store.snapshot(), before);
    // The same index applies once the entry is one this build knows.
    const result = decodeResult(store.apply(2, control({ type: 'cluster.version', version: 2 })));
    assert.deepEqual(result, { type: 'control', result: { type: 'clusterVersion', version: 2 } });
  });

  it('cluster.version raises the effective version, never lowers it, and snapshots follow', () => {
    const state = new ControlState();
    assert.equal(state.clusterVersion, 1);
    const atOne = state.snapshot();
    assert.ok(formatOf(atOne) <= 5, 'a cluster at version 1 writes a format builds 0.1.x read');
    assert.ok(!new TextDecoder().decode(atOne).includes('clusterVersion'));
    assert.deepEqual(state.apply(1, 5, { type: 'cluster.version', version: 2 }), {
      type: 'clusterVersion',
      version: 2,
    });
    assert.deepEqual(state.apply(2, 6, { type: 'cluster.version', version: 1 }), {
      type: 'clusterVersion',
      version: 2,
    });
    assert.equal(state.clusterVersion, 2);
    const atTwo = state.snapshot();
    assert.equal(formatOf(atTwo), 6);
    const copy = new ControlState();
    copy.restore(atTwo);
    assert.equal(copy.clusterVersion, 2);
    assert.deepEqual(copy.snapshot(), atTwo);
  });

  it('the gate lets through what the cluster runs, and cluster.version only up to this build', () => {
    assert.equal(clusterVersionRefusal({ type: 'workflow.delete', id: 'w' }, 1), undefined);
    assert.equal(clusterVersionRefusal({ type: 'cluster.version', version: 2 }, 1), undefined);
    const next = stateVersionOfThisBuild + 1;
    assert.ok(
      (clusterVersionRefusal({ type: 'cluster.version', version: next }, 2) ?? '').includes(
        `needs state version ${next}; this node's build (0.2.0) supports up to ${stateVersionOfThisBuild}`,
      ),
    );
  });

  it('a workflow naming a built-in newer builds added (cexec, archive2disk, ...) needs the fleet version', () => {
    const workflow = (builtin: BuiltinAction): ControlCommand => ({
      type: 'workflow.create',
      id: 'w1',
      template: 't',
      templateVersion: 1,
      hardwareId: 'm1',
      hardwareMap: {},
      spec: {
        version: '0.1',
        name: 't',
        globalTimeoutS: 60,
        tasks: [
          {
            name: 'only',
            worker: 'm1',
            env: {},
            volumes: [],
            actions: [
              { name: 'a', command: [], args: [], env: {}, volumes: [], timeoutS: 60, retries: 0, builtin },
            ],
          },
        ],
      },
    });
    assert.equal(controlCommandVersion(workflow('reboot')), stateVersionBaseline);
    assert.equal(controlCommandVersion(workflow('cexec')), 3);
    assert.equal(controlCommandVersion(workflow('archive2disk')), 3);
    assert.equal(controlCommandVersion(workflow('qemuimg2disk')), 3);
    assert.equal(controlCommandVersion(workflow('rootio')), 3);
    assert.equal(controlCommandVersion(workflow('syslinux')), 3);
    assert.equal(controlCommandVersion(workflow('oci2disk')), 3);
    assert.equal(controlCommandVersion(workflow('grub2disk')), 3);
    assert.match(
      clusterVersionRefusal(workflow('cexec'), 2) ?? '',
      /workflow.create needs cluster version 3/,
    );
    assert.equal(payloadVersionOf(control(workflow('cexec'))), 3);
  });

  it('the leader raises the cluster to the lowest version every voter applies', () => {
    assert.equal(versionAllVotersApply([2, 2, 2]), 2);
    // A voter on a build before versions answers 0: it applies version 1.
    assert.equal(versionAllVotersApply([2, 0, 2]), 1);
    assert.equal(versionAllVotersApply([stateVersionOfThisBuild, 9]), stateVersionOfThisBuild);
  });
});

describe('cluster version and upgrade check', () => {
  const member = (id: string, fields: Partial<NonNullable<MemberReport['status']>> = {}): MemberReport => ({
    id,
    voter: true,
    status: {
      build: '0.2.0',
      stateVersion: 2,
      clusterVersion: 2,
      leader: 'n1',
      commit: 500,
      applied: 500,
      stopped: '',
      leaderTransferee: '',
      ...fields,
    },
  });

  it('summarises what the members run', () => {
    assert.deepEqual(versionSummary([member('n1'), member('n2'), member('n3')]), {
      effective: 2,
      votersSupport: 2,
    });
    const midUpgrade = [
      member('n1', { clusterVersion: 1 }),
      member('n2', { build: '', stateVersion: 0, clusterVersion: 0 }),
      member('n3', { clusterVersion: 1 }),
    ];
    assert.deepEqual(versionSummary(midUpgrade), { effective: 1, votersSupport: 1 });
    assert.deepEqual(versionSummary([member('n1'), { id: 'n2', voter: true, error: 'down' }]), {
      effective: 2,
      votersSupport: undefined,
    });
  });

  it('a healthy cluster may restart any one node', () => {
    const checks = upgradeChecks([member('n1'), member('n2'), member('n3')], 'n2');
    assert.ok(
      checks.every((c) => c.ok),
      JSON.stringify(checks),
    );
    assert.equal(checks.length, 5);
  });

  it('refuses with the reason: a voter down, no agreed leader, stopped, behind, a transfer', () => {
    const refusal = (members: MemberReport[], who?: string): string =>
      upgradeChecks(members, who)
        .filter((c) => !c.ok)
        .map((c) => c.what)
        .join(' | ');
    assert.match(
      refusal([member('n1'), { id: 'n2', voter: true, error: 'connection refused' }, member('n3')]),
      /voter\(s\) not answering: n2 \(connection refused\)/,
    );
    assert.match(refusal([member('n1'), member('n2', { leader: 'n3' }), member('n3')]), /no agreed leader/);
    assert.match(
      refusal([member('n1'), member('n2', { stopped: 'entry 9 needs state version 3' }), member('n3')]),
      /stopped applying: n2 \(entry 9 needs state version 3\)/,
    );
    assert.match(
      refusal([member('n1'), member('n2', { applied: 10 }), member('n3')], 'n2'),
      /behind the leader's commit index 500: n2 applied 10/,
    );
    assert.equal(refusal([member('n1'), member('n2', { applied: 10 }), member('n3')], 'n3'), '');
    assert.match(
      refusal([member('n1', { leaderTransferee: 'n3' }), member('n2'), member('n3')]),
      /leadership is being handed to n3/,
    );
    assert.match(refusal([member('n1')], 'n7'), /n7 is not a member/);
  });
});
