// Goal: show the state machine's binary formats are exact and strict: every valid command and
// result survives encode/decode unchanged, varints are canonical at their boundaries, and any
// byte string either decodes to a valid command or fails with a DecodeError (never another
// exception), since apply turns exactly that error into E_BAD_COMMAND.
// Method: fast-check round trips over generated commands and results, fixed boundary vectors,
// and fuzzing with random and mutated byte strings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BinaryReader, BinaryWriter, DecodeError, utf8Length } from '../../src/state/binary.js';
import {
  commandProblem,
  decodeCommand,
  decodeResult,
  encodeCommand,
  encodeResult,
  errorCodes,
  type Command,
  type CommandResult,
  type SessionTag,
} from '../../src/state/command.js';

const count = fc.nat({ max: Number.MAX_SAFE_INTEGER });
const name = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 });
const session: fc.Arbitrary<SessionTag | undefined> = fc.option(
  fc
    .tuple(
      fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      fc.integer({ min: 1, max: 2 ** 40 }),
      fc.nat(),
    )
    .map(([clientId, seq, acked]) => ({ clientId, seq, ackedSeq: acked % seq })),
  { nil: undefined },
);
const optional = <K extends string, V>(key: K, value: V | undefined) =>
  (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;

const command: fc.Arbitrary<Command> = fc.oneof(
  fc
    .tuple(count, session, name, name, fc.uint8Array({ maxLength: 40 }), fc.option(count, { nil: undefined }))
    .map(([stampMs, s, ns, key, value, prev]): Command => ({
      type: 'put',
      stampMs,
      ns,
      key,
      value,
      ...optional('session', s),
      ...optional('prevRevision', prev),
    })),
  fc
    .tuple(count, session, name, name, fc.option(fc.integer({ min: 1, max: 2 ** 50 }), { nil: undefined }))
    .map(([stampMs, s, ns, key, prev]): Command => ({
      type: 'delete',
      stampMs,
      ns,
      key,
      ...optional('session', s),
      ...optional('prevRevision', prev),
    })),
  count.map((stampMs): Command => ({ type: 'registerClient', stampMs })),
  fc
    .tuple(count, session)
    .map(([stampMs, s]): Command => ({ type: 'noop', stampMs, ...optional('session', s) })),
);

const prev = fc
  .tuple(fc.uint8Array({ maxLength: 20 }), fc.integer({ min: 1, max: 1000 }), fc.nat(1000), fc.nat(1000))
  .map(([value, createRevision, extra, v]) => ({
    value,
    createRevision,
    modRevision: createRevision + extra,
    version: 1 + (v % (extra + 1)),
  }));
const result: fc.Arbitrary<CommandResult> = fc.oneof(
  fc
    .tuple(fc.constantFrom(...errorCodes), fc.string({ maxLength: 50 }))
    .map(([code, message]): CommandResult => ({
      type: 'error',
      code,
      message: message.replace(/\p{Cs}/gu, '?'),
    })),
  count.map((revision): CommandResult => ({ type: 'noop', revision })),
  count.map((clientId): CommandResult => ({ type: 'registerClient', clientId })),
  fc
    .tuple(count, fc.option(prev, { nil: undefined }))
    .map(([revision, p]): CommandResult => ({ type: 'put', revision, ...optional('prev', p) })),
  fc.tuple(count, prev).map(([revision, p]): CommandResult => ({ type: 'delete', revision, prev: p })),
);

test('property: every valid command round-trips exactly', () => {
  fc.assert(
    fc.property(command, (c) => {
      assert.equal(commandProblem(c), undefined);
      assert.deepEqual(decodeCommand(encodeCommand(c)), c);
    }),
    { numRuns: 500 },
  );
});

test('property: every result round-trips exactly', () => {
  fc.assert(
    fc.property(result, (r) => {
      assert.deepEqual(decodeResult(encodeResult(r)), r);
    }),
    { numRuns: 500 },
  );
});

test('property: decoding arbitrary or mutated bytes yields a valid command or a DecodeError, nothing else', () => {
  const mutated = fc.tuple(command, fc.nat(), fc.integer({ min: 1, max: 255 })).map(([c, at, xor]) => {
    const bytes = encodeCommand(c);
    bytes[at % bytes.length]! ^= xor;
    return bytes;
  });
  fc.assert(
    fc.property(fc.oneof(fc.uint8Array({ maxLength: 40 }), mutated), (bytes) => {
      let decoded: Command;
      try {
        decoded = decodeCommand(bytes);
      } catch (e) {
        assert.ok(e instanceof DecodeError, `unexpected ${String(e)}`);
        assert.match(e.message, / at byte \d+$|^(unsupported|unknown|invalid|registerClient|noop)/);
        return;
      }
      assert.equal(commandProblem(decoded), undefined);
      assert.deepEqual(encodeCommand(decoded), bytes, 'a decodable command has exactly one encoding');
    }),
    { numRuns: 1_000 },
  );
});

test('varints are canonical LEB128 up to 2^53 - 1', () => {
  const vectors: [number, number[]][] = [
    [0, [0x00]],
    [127, [0x7f]],
    [128, [0x80, 0x01]],
    [300, [0xac, 0x02]],
    [Number.MAX_SAFE_INTEGER, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]],
  ];
  for (const [value, bytes] of vectors) {
    assert.deepEqual([...new BinaryWriter().uvarint(value).finish()], bytes);
    assert.equal(new BinaryReader(Uint8Array.from(bytes)).uvarint('v'), value);
  }
  const read = (bytes: number[]) => () => new BinaryReader(Uint8Array.from(bytes)).uvarint('v');
  assert.throws(read([0x80, 0x00]), /v: overlong varint at byte 0/);
  assert.throws(read([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]), /v: varint exceeds 2\^53 - 1/);
  assert.throws(read([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), /longer than 8 bytes/);
  assert.throws(read([0x80]), /v: truncated/);
  assert.throws(() => new BinaryWriter().uvarint(-1), /non-negative safe integer/);
  assert.throws(() => new BinaryWriter().uvarint(2 ** 53), /non-negative safe integer/);
});

test('strings keep a leading byte-order mark and reject invalid UTF-8 and over-long lengths', () => {
  const bom = '\ufeffkey';
  const bytes = new BinaryWriter().string(bom).finish();
  assert.equal(new BinaryReader(bytes).string('s', 100), bom);
  assert.throws(
    () => new BinaryReader(Uint8Array.of(2, 0xc3, 0x28)).string('s', 100),
    /s: invalid UTF-8 at byte 0/,
  );
  assert.throws(
    () => new BinaryReader(Uint8Array.of(5, 1, 2, 3, 4, 5)).string('s', 4),
    /s: 5 bytes exceeds the limit of 4/,
  );
  assert.throws(() => new BinaryWriter().string('\udc00'), /unpaired surrogate/);
});

test('property: utf8Length agrees with TextEncoder for well-formed strings', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 30 }), (s) => {
      assert.equal(utf8Length(s), new TextEncoder().encode(s).length);
    }),
  );
});

test('decodeResult refuses unknown codes, versions and inconsistent previous values', () => {
  const ok = encodeResult({ type: 'error', code: 'E_NOT_FOUND', message: 'm' });
  const unknownCode = new BinaryWriter().u8(1).u8(0).string('E_WHATEVER').string('m').finish();
  assert.throws(() => decodeResult(unknownCode), /unknown error code "E_WHATEVER"/);
  assert.throws(
    () => decodeResult(Uint8Array.from([2, ...ok.subarray(1)])),
    /unsupported result codec version 2/,
  );
  const badPrev = new BinaryWriter()
    .u8(1)
    .u8(4)
    .uvarint(9)
    .bytes(new Uint8Array(0))
    .uvarint(5)
    .uvarint(3)
    .uvarint(1);
  assert.throws(() => decodeResult(badPrev.finish()), /prev revisions are inconsistent: create 5, mod 3/);
});

test('long error messages are cut to the limit at a character boundary', () => {
  const message = '€'.repeat(2_000);
  const decoded = decodeResult(encodeResult({ type: 'error', code: 'E_BAD_COMMAND', message }));
  assert.equal(decoded.type, 'error');
  assert.ok(utf8Length(decoded.message) <= 1024);
  assert.ok(decoded.message.endsWith('€…'));
});
