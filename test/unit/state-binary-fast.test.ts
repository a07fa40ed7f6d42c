// Goal: the state codec's fast paths change no byte and no answer: the hand-written
// well-formedness check agrees with the \p{Cs} regex it replaced, strings are written as
// TextEncoder writes them, varint sizes are exact, commands are encoded into an array of exactly
// their size (so finish() does not copy), and a change listener still gets a value of its own.
// Method: fast-check properties over UTF-16 strings rich in surrogates and over commands, and a
// KvStore whose listener mutates what it is given.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BinaryReader, BinaryWriter, uvarintBytes } from '../../src/state/binary.js';
import { isWellFormed } from '../../src/platform/utf8-text.js';
import { encodeCommand, type Command } from '../../src/state/store-command.js';
import { KvStore, type ChangeEvent } from '../../src/state/kv-store.js';

/** Strings of arbitrary UTF-16 units, half of them surrogates, so lone halves are common. */
const utf16 = fc
  .array(
    fc.oneof(
      fc.integer({ min: 0, max: 0x7f }),
      fc.integer({ min: 0x80, max: 0xffff }),
      fc.integer({ min: 0xd800, max: 0xdbff }),
      fc.integer({ min: 0xdc00, max: 0xdfff }),
    ),
    { maxLength: 12 },
  )
  .map((units) => String.fromCharCode(...units));

test('isWellFormed agrees with the \\p{Cs} regex', () => {
  fc.assert(
    fc.property(utf16, (s) => {
      assert.equal(isWellFormed(s), !/\p{Cs}/u.test(s), JSON.stringify(s));
    }),
    { numRuns: 3000 },
  );
  assert.equal(isWellFormed('a\uD83D\uDE00b'), true);
  assert.equal(isWellFormed('a\uD83D'), false);
  assert.equal(isWellFormed('\uDE00a'), false);
});

test('BinaryWriter.string writes what TextEncoder writes, and refuses lone surrogates', () => {
  const encoder = new TextEncoder();
  fc.assert(
    fc.property(utf16, (s) => {
      const w = new BinaryWriter(4);
      if (!isWellFormed(s)) {
        assert.throws(() => w.string(s), /unpaired surrogate/);
        return;
      }
      const bytes = w.string(s).finish();
      const utf8 = encoder.encode(s);
      assert.deepEqual(bytes.subarray(bytes.length - utf8.length), utf8);
      assert.equal(new BinaryReader(bytes).string('s', 1000), s);
    }),
    { numRuns: 2000 },
  );
});

test('uvarintBytes is the length uvarint writes', () => {
  fc.assert(
    fc.property(fc.oneof(fc.nat({ max: 300 }), fc.nat({ max: Number.MAX_SAFE_INTEGER })), (n) => {
      assert.equal(uvarintBytes(n), new BinaryWriter(1).uvarint(n).finish().length);
    }),
  );
});

test('a writer of the exact size hands over its array; a larger one copies what was written', () => {
  const exact = new BinaryWriter(3);
  const out = exact.u8(1).u8(2).u8(3).finish();
  assert.deepEqual([...out], [1, 2, 3]);
  assert.equal(out.buffer.byteLength, 3);
  const roomy = new BinaryWriter(64).u8(7).finish();
  assert.deepEqual([...roomy], [7]);
  assert.equal(roomy.buffer.byteLength, 1);
});

test('commands are encoded into an array of exactly their size', () => {
  const name = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 });
  const stamp = fc.nat({ max: Number.MAX_SAFE_INTEGER });
  const session = fc.option(
    fc
      .tuple(fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 1, max: 2 ** 40 }), fc.nat())
      .map(([clientId, seq, acked]) => ({ clientId, seq, ackedSeq: acked % seq })),
    { nil: undefined },
  );
  const command: fc.Arbitrary<Command> = fc.oneof(
    fc
      .record({
        ns: name,
        key: name,
        value: fc.uint8Array({ maxLength: 300 }),
        stampMs: stamp,
        session,
        prev: fc.option(fc.nat(), { nil: undefined }),
      })
      .map(({ session: tag, prev, ...put }) => ({
        type: 'put' as const,
        ...put,
        ...(tag === undefined ? {} : { session: tag }),
        ...(prev === undefined ? {} : { prevRevision: prev }),
      })),
    fc.record({ ns: name, key: name, stampMs: stamp }).map((d) => ({ type: 'delete' as const, ...d })),
    stamp.map((stampMs) => ({ type: 'noop' as const, stampMs })),
    fc.record({ id: name, stampMs: stamp }).map(({ id, stampMs }): Command => ({
      type: 'control',
      stampMs,
      command: { type: 'workflow.delete', id },
    })),
  );
  fc.assert(
    fc.property(command, (c) => {
      const bytes = encodeCommand(c);
      assert.equal(bytes.byteOffset, 0);
      assert.equal(bytes.buffer.byteLength, bytes.byteLength);
    }),
    { numRuns: 1000 },
  );
});

test('a change listener gets a copy of the value, made only for it', () => {
  const store = new KvStore();
  const value = Uint8Array.of(1, 2, 3);
  const put = (index: number): Uint8Array =>
    store.apply(index, encodeCommand({ type: 'put', ns: 'n', key: 'k', value, stampMs: index }));
  put(1);
  const seen: ChangeEvent[] = [];
  store.onChange = (e) => {
    seen.push(e);
    e.value?.fill(0);
  };
  put(2);
  assert.equal(seen.length, 1);
  assert.deepEqual([...(store.get('n', 'k')?.value ?? [])], [1, 2, 3]);
});

test('results and snapshots are built in arrays of exactly their size, and snapshots restore', () => {
  const store = new KvStore();
  let index = 0;
  const apply = (command: Command): Uint8Array => store.apply(++index, encodeCommand(command));
  const results = [
    apply({ type: 'put', ns: 'kv', key: 'a', value: Uint8Array.of(1, 2), stampMs: 5 }),
    apply({ type: 'put', ns: 'kv', key: 'a', value: Uint8Array.of(3), stampMs: 6 }),
    apply({ type: 'put', ns: 'ключи', key: 'b😀', value: new Uint8Array(300).fill(9), stampMs: 7 }),
    apply({ type: 'delete', ns: 'kv', key: 'a', stampMs: 8 }),
    apply({ type: 'delete', ns: 'kv', key: 'missing', stampMs: 9 }),
    apply({ type: 'registerClient', stampMs: 10 }),
    apply({ type: 'control', stampMs: 11, command: { type: 'workflow.delete', id: 'none' } }),
  ];
  for (const r of results) assert.equal(r.buffer.byteLength, r.byteLength);

  const snapshot = store.snapshot();
  assert.equal(snapshot.buffer.byteLength, snapshot.byteLength);
  const restored = new KvStore();
  restored.restore(snapshot);
  assert.deepEqual(restored.snapshot(), snapshot);
  assert.deepEqual([...(restored.get('ключи', 'b😀')?.value ?? [])], [...new Uint8Array(300).fill(9)]);
});
