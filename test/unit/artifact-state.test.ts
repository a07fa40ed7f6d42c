// Goal: prove the artifact catalogue in the replicated state: artifact.put registers a name with
// its digest and size (version 1), the same digest again changes nothing, another digest
// replaces it as the next version (conditional on expectVersion when given), artifact.delete
// drops it; bad input (unsafe names, malformed digests, sizes out of range, a full catalogue)
// is refused with E_INVALID or E_CONFLICT naming the field and changes nothing; and artifacts
// survive a snapshot and restore byte for byte, in format 4 only when some are registered.
// Method: drive ControlState only through apply() with explicit leader stamps, every command
// through the codec as in the log.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import { ControlState } from '../../src/state/control/control-state.js';
import { decodeControlCommand, encodeControlCommand } from '../../src/state/control/codec.js';
import type { Artifact } from '../../src/model/records.js';
import { DecodeError } from '../../src/state/binary.js';
import { ShapeError } from '../../src/state/control/shape.js';
import { artifactsMax } from '../../src/model/limits.js';

const digestA = 'a'.repeat(64);
const digestB = 'b'.repeat(64);

class Harness {
  readonly state = new ControlState();
  index = 0;
  nowMs = 7_000_000;
  readonly changes: string[] = [];

  constructor() {
    this.state.changes.on('artifact', ({ name }) => this.changes.push(name));
  }

  run(command: ControlCommand): ControlResult {
    const decoded = decodeControlCommand(encodeControlCommand(command));
    this.nowMs += 1;
    return this.state.apply(++this.index, this.nowMs, decoded);
  }

  put(name: string, sha256: string, bytes: number, expectVersion?: number): Artifact {
    const r = this.run({
      type: 'artifact.put',
      name,
      sha256,
      bytes,
      ...(expectVersion === undefined ? {} : { expectVersion }),
    });
    assert.equal(r.type, 'artifact', JSON.stringify(r));
    return r.artifact;
  }

  refused(command: ControlCommand, code: string, why: RegExp): void {
    const before = withoutIndex(this.state.snapshot());
    const changes = this.changes.length;
    const r = this.run(command);
    assert.equal(r.type, 'error', `${command.type} should be refused: ${JSON.stringify(r)}`);
    assert.equal(r.code, code, r.message);
    assert.match(r.message, why);
    assert.deepEqual(withoutIndex(this.state.snapshot()), before, 'a refused command changed the state');
    assert.equal(this.changes.length, changes, 'a refused command notified');
  }
}

/** The snapshot without its appliedIndex, which every command moves. */
function withoutIndex(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes).replace(/"appliedIndex":\d+/, '');
}

function put(name: string, sha256 = digestA, bytes = 10): ControlCommand {
  return { type: 'artifact.put', name, sha256, bytes };
}

describe('artifact.put and artifact.delete', () => {
  it('registers, keeps a same-digest put as a no-op, replaces with a new version, deletes', () => {
    const h = new Harness();
    const first = h.put('debian-12.raw.zst', digestA.toUpperCase(), 5 * 1024 * 1024);
    assert.deepEqual(first, {
      name: 'debian-12.raw.zst',
      sha256: digestA,
      bytes: 5 * 1024 * 1024,
      createdMs: h.nowMs,
      updatedMs: h.nowMs,
      version: 1,
    });
    assert.deepEqual(h.changes, ['debian-12.raw.zst']);
    // An upload retried elsewhere after a lost answer: acknowledged, nothing changes.
    const again = h.put('debian-12.raw.zst', digestA, 5 * 1024 * 1024);
    assert.deepEqual(again, first);
    assert.equal(h.changes.length, 1);
    const replaced = h.put('debian-12.raw.zst', digestB, 6);
    assert.equal(replaced.version, 2);
    assert.equal(replaced.sha256, digestB);
    assert.equal(replaced.createdMs, first.createdMs);
    assert.equal(replaced.updatedMs, h.nowMs);
    assert.deepEqual(h.state.artifact('debian-12.raw.zst'), replaced);
    h.put('vmlinuz-x86_64', digestA, 10);
    assert.deepEqual(
      h.state.artifacts().map((a) => a.name),
      ['debian-12.raw.zst', 'vmlinuz-x86_64'],
    );
    assert.equal(h.run({ type: 'artifact.delete', name: 'debian-12.raw.zst' }).type, 'deleted');
    assert.equal(h.state.artifact('debian-12.raw.zst'), undefined);
    assert.deepEqual(h.changes, [
      'debian-12.raw.zst',
      'debian-12.raw.zst',
      'vmlinuz-x86_64',
      'debian-12.raw.zst',
    ]);
    // A deleted name starts again at version 1.
    assert.equal(h.put('debian-12.raw.zst', digestB, 6).version, 1);
  });

  it('expectVersion makes a create or a replace conditional', () => {
    const h = new Harness();
    h.refused(
      { ...put('k'), expectVersion: 1 } as ControlCommand,
      'E_NOT_FOUND',
      /artifact "k" does not exist/,
    );
    assert.equal(h.put('k', digestA, 1, 0).version, 1);
    // The same digest under expectVersion 0 is the retried create: acknowledged.
    assert.equal(h.put('k', digestA, 1, 0).version, 1);
    h.refused(
      { type: 'artifact.put', name: 'k', sha256: digestB, bytes: 1, expectVersion: 0 },
      'E_EXISTS',
      /artifact "k" already exists \(version 1/,
    );
    h.refused(
      { type: 'artifact.put', name: 'k', sha256: digestB, bytes: 1, expectVersion: 2 },
      'E_VERSION',
      /is at version 1, not 2/,
    );
    assert.equal(h.put('k', digestB, 1, 1).version, 2);
  });

  it('refuses bad input with a message naming the field, changing nothing', () => {
    const h = new Harness();
    h.put('kept', digestA, 3);
    const badNames = ['', '.', '..', '.hidden', 'a/b', '../etc/passwd', 'a b', 'é', 'x'.repeat(201), '-rf'];
    for (const name of badNames) h.refused(put(name), 'E_INVALID', /^name: .* must be 1-200 characters/);
    h.refused(put('ok', 'z'.repeat(64)), 'E_INVALID', /^sha256: must be 64 hexadecimal digits/);
    h.refused(put('ok', digestA.slice(1)), 'E_INVALID', /^sha256:/);
    h.refused(put('ok', digestA, -1), 'E_INVALID', /^bytes: must be 0-1099511627776, got -1/);
    h.refused(put('ok', digestA, 2 ** 41), 'E_INVALID', /^bytes:/);
    assert.throws(() => encodeControlCommand(put('ok', digestA, 1.5)), /bytes: must be an integer, got 1.5/);
    // The same digest with another size: one of the two was measured wrong.
    h.refused(put('kept', digestA, 4), 'E_INVALID', /has sha256 a+ with 3 bytes, not 4/);
    h.refused(
      { type: 'artifact.delete', name: 'missing' },
      'E_NOT_FOUND',
      /artifact "missing" does not exist/,
    );
    // The codec refuses what is not a command at all.
    assert.throws(
      () => decodeControlCommand('{"type":"artifact.put","name":"x","sha256":"y"}'),
      (e: unknown) => e instanceof ShapeError && /bytes: is required/.test(e.message),
    );
  });

  it('refuses one artifact beyond the bound, but still replaces and re-puts', () => {
    const h = new Harness();
    for (let i = 0; i < artifactsMax; i++) h.put(`a${String(i).padStart(4, '0')}`, digestA, 1);
    h.refused(put('one-more'), 'E_CONFLICT', /maximum of 1000 artifacts; delete some first/);
    assert.equal(h.put('a0000', digestB, 1).version, 2);
    assert.equal(h.run({ type: 'artifact.delete', name: 'a0001' }).type, 'deleted');
    assert.equal(h.put('one-more', digestA, 1).version, 1);
  });
});

describe('artifacts in snapshots', () => {
  it('survive snapshot and restore byte for byte in format 4; without them the format is unchanged', () => {
    const h = new Harness();
    const empty = new TextDecoder().decode(h.state.snapshot());
    assert.match(empty, /^\{"format":2,/);
    h.put('vmlinuz-x86_64', digestA, 10);
    h.put('initramfs-x86_64', digestB, 20);
    const bytes = h.state.snapshot();
    const text = new TextDecoder().decode(bytes);
    assert.match(text, /^\{"format":4,/);
    assert.doesNotMatch(text, /"powerJobs"/);
    assert.match(text, /"artifacts":\[\{"name":"initramfs-x86_64","sha256":"b{64}","bytes":20,/);
    const copy = new ControlState();
    let restores = 0;
    copy.changes.on('restore', () => restores++);
    copy.restore(bytes);
    assert.equal(restores, 1);
    assert.deepEqual(copy.snapshot(), bytes);
    assert.deepEqual(copy.artifacts(), h.state.artifacts());
    // The copy goes on exactly as the original.
    const next = put('vmlinuz-x86_64', digestB, 11);
    h.nowMs += 1;
    const r1 = h.state.apply(++h.index, h.nowMs, next);
    const r2 = copy.apply(h.index, h.nowMs, next);
    assert.deepEqual(r2, r1);
    assert.deepEqual(copy.snapshot(), h.state.snapshot());
    // Deleting the last one gives back the bytes of the state that never had any.
    h.run({ type: 'artifact.delete', name: 'vmlinuz-x86_64' });
    h.run({ type: 'artifact.delete', name: 'initramfs-x86_64' });
    assert.equal(withoutIndex(h.state.snapshot()), empty.replace(/"appliedIndex":\d+/, ''));
  });

  it('refuses a snapshot with malformed, unordered or unsafe artifacts and keeps its state', () => {
    const h = new Harness();
    h.put('b-file', digestB, 2);
    h.put('a-file', digestA, 1);
    const image = JSON.parse(new TextDecoder().decode(h.state.snapshot())) as {
      format: number;
      artifacts: Record<string, unknown>[];
    };
    const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
    const [a, b] = image.artifacts;
    assert.ok(a !== undefined && b !== undefined);
    const cases: [Uint8Array, RegExp][] = [
      [encode({ ...image, artifacts: [b, a] }), /artifacts: "a-file" is out of order/],
      [encode({ ...image, artifacts: [a, a] }), /artifacts: "a-file" is out of order or repeated/],
      [encode({ ...image, artifacts: [] }), /artifacts: format 4 needs at least one/],
      [encode({ ...image, format: 2 }), /format 2 has no artifacts/],
      [encode({ ...image, powerJobs: [] }), /powerJobs: format 4 leaves out an empty list/],
      [encode({ ...image, artifacts: [{ ...a, name: '../x' }, b] }), /artifact "\.\.\/x": name:/],
      [
        encode({ ...image, artifacts: [{ ...a, sha256: digestA.toUpperCase() }, b] }),
        /sha256: must be 64 lower-case/,
      ],
      [encode({ ...image, artifacts: [{ ...a, bytes: -1 }, b] }), /artifacts\[0\]\.bytes: must be in/],
      [encode({ ...image, artifacts: [{ ...a, extra: 1 }, b] }), /unknown field "extra"/],
    ];
    const target = new Harness();
    target.put('kept', digestA, 1);
    const before = target.state.snapshot();
    target.state.changes.on('restore', () => assert.fail('a refused restore must not notify'));
    for (const [data, why] of cases) {
      assert.throws(
        () => target.state.restore(data),
        (e: unknown) => e instanceof DecodeError && why.test(e.message),
        String(why),
      );
      assert.deepEqual(target.state.snapshot(), before);
    }
  });
});
