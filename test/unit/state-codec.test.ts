// Goal: show the state machine's binary formats are exact and strict: every valid command and
// result survives encode/decode unchanged, varints are canonical at their boundaries, and any
// byte string either decodes to a valid command or fails with a DecodeError (never another
// exception), since apply turns exactly that error into E_BAD_COMMAND.
// Control commands and results (JSON inside the framing) obey the same rules: one canonical
// encoding each, and refusals that name the field.
// Method: fast-check round trips over generated commands and results, fixed boundary vectors,
// and fuzzing with random and mutated byte strings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BinaryReader, BinaryWriter, DecodeError } from '../../src/state/binary.js';
import { utf8Length } from '../../src/platform/utf8-text.js';
import {
  commandProblem,
  decodeCommand,
  decodeResult,
  encodeCommand,
  encodeResult,
  errorCodes,
  InvalidCommandError,
  type Command,
  type CommandResult,
  type SessionTag,
} from '../../src/state/store-command.js';
import type { ControlCommand, ControlResult } from '../../src/state/control/commands.js';
import type {
  HardwareInput,
  ActionStatus,
  JsonValue,
  RenderedTemplate,
  Workflow,
} from '../../src/model/records.js';
import { controlErrorCodes } from '../../src/state/control/commands.js';
import { controlCommandBytesMax } from '../../src/model/limits.js';
import { EntryTooNewError, stateVersionOfThisBuild } from '../../src/state/versions.js';

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

// ---- control-plane values ----

const text = fc.string({ unit: 'grapheme', maxLength: 10 });
const int = fc.integer({ min: -(2 ** 40), max: 2 ** 40 });
const strings = fc.array(text, { maxLength: 3 });
const stringMap = fc.dictionary(text, text, { maxKeys: 3 });
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
/** T with its `X | undefined` fields made optional fields of type X. */
type Defined<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};
/** Copies `o` without its undefined fields, as optional fields are absent in JSON. */
function defined<T extends object>(o: T): Defined<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Defined<T>;
}
/** fast-check builds records without a prototype; decoded JSON has Object's. */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

const jsonValue: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    int,
    text,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(text, tie('value'), { maxKeys: 3 }),
  ),
})).value;

const hardwareInput: fc.Arbitrary<HardwareInput> = fc
  .record({
    id: text,
    interfaces: fc.array(
      fc
        .record({
          mac: text,
          ip: opt(fc.record({ address: text, prefix: int })),
          gateway: opt(text),
          dns: strings,
          hostname: opt(text),
          leaseTimeS: int,
          vlan: opt(int),
        })
        .map(defined),
      { maxLength: 2 },
    ),
    arch: fc.constantFrom('x86_64' as const, 'arm64' as const),
    uefi: fc.boolean(),
    netboot: fc
      .record({
        allowPXE: fc.boolean(),
        allowWorkflow: fc.boolean(),
        ipxeScript: opt(text),
        ipxeUrl: opt(text),
      })
      .map(defined),
    metadata: fc.dictionary(text, jsonValue, { maxKeys: 3 }),
    bmc: opt(fc.record({ address: text, username: opt(text), secretRef: opt(text) }).map(defined)),
  })
  .map(defined);

const spec: fc.Arbitrary<RenderedTemplate> = fc.record({
  version: text,
  name: text,
  globalTimeoutS: int,
  tasks: fc.array(
    fc.record({
      name: text,
      worker: text,
      env: stringMap,
      volumes: strings,
      actions: fc.array(
        fc
          .record({
            name: text,
            image: opt(text),
            command: strings,
            args: strings,
            env: stringMap,
            volumes: strings,
            timeoutS: int,
            retries: int,
          })
          .map(defined),
        { maxLength: 2 },
      ),
    }),
    { maxLength: 2 },
  ),
});

const attemptRef = fc.record({ workflowId: text, actionIndex: count, attempt: count, workerId: text });
const controlCommand: fc.Arbitrary<ControlCommand> = fc
  .oneof(
    fc
      .record({
        hardware: hardwareInput,
        workerTokenSha256: opt(text),
        workerToken: opt(text),
        expectVersion: opt(count),
      })
      .map((c) => defined({ type: 'hardware.put' as const, ...c })),
    text.map((id) => ({ type: 'hardware.delete' as const, id })),
    fc.record({ id: text, workerTokenSha256: text }).map((c) => ({ type: 'hardware.token' as const, ...c })),
    fc
      .record({ id: text, allowPXE: fc.boolean() })
      .map((c) => ({ type: 'hardware.setAllowPXE' as const, ...c })),
    fc
      .record({
        name: text,
        source: fc.string({ maxLength: 40 }).map((x) => x.replace(/\p{Cs}/gu, '?')),
        expectVersion: opt(count),
      })
      .map((c) => defined({ type: 'template.put' as const, ...c })),
    text.map((name) => ({ type: 'template.delete' as const, name })),
    fc
      .record({
        id: text,
        template: text,
        templateVersion: count,
        hardwareId: text,
        hardwareMap: stringMap,
        spec,
      })
      .map((c) => ({ type: 'workflow.create' as const, ...c })),
    attemptRef.map((c) => ({ type: 'attempt.start' as const, ...c })),
    fc
      .record({ ref: attemptRef, success: fc.boolean(), exitStatus: int, message: text, outputTail: text })
      .map(({ ref, ...c }) => ({ type: 'attempt.result' as const, ...ref, ...c })),
    fc
      .record({ ref: attemptRef, message: text })
      .map(({ ref, message }) => ({ type: 'attempt.lost' as const, ...ref, message })),
    text.map((workflowId) => ({ type: 'deadline.expire' as const, workflowId })),
    fc
      .record({ id: text, message: opt(text) })
      .map((c) => defined({ type: 'workflow.cancel' as const, ...c })),
    fc.record({ id: text, fromStart: fc.boolean() }).map((c) => ({ type: 'workflow.retry' as const, ...c })),
    text.map((id) => ({ type: 'workflow.delete' as const, id })),
    fc
      .record({
        name: text,
        role: fc.constantFrom('admin' as const, 'operator' as const, 'viewer' as const),
        sha256: text,
      })
      .map((c) => ({ type: 'token.put' as const, ...c })),
    text.map((name) => ({ type: 'token.delete' as const, name })),
  )
  .map(plain);

const actionStateArb = fc.constantFrom(
  'PENDING',
  'RUNNING',
  'SUCCESS',
  'FAILED',
  'TIMEOUT',
  'CANCELLED' as const,
);
const actionStatus: fc.Arbitrary<ActionStatus> = fc
  .record({
    state: actionStateArb,
    attempt: count,
    attemptsBefore: opt(count),
    startedMs: opt(count),
    stoppedMs: opt(count),
    deadlineMs: opt(count),
    notBeforeMs: opt(count),
    exitStatus: opt(int),
    message: opt(text),
    outputTail: opt(text),
    workerId: opt(text),
  })
  .map(defined);
const workflow: fc.Arbitrary<Workflow> = fc
  .record({
    id: text,
    template: text,
    hardwareId: text,
    hardwareMap: stringMap,
    spec,
    state: actionStateArb,
    createdMs: count,
    startedMs: opt(count),
    finishedMs: opt(count),
    deadlineMs: opt(count),
    actions: fc.array(actionStatus, { maxLength: 3 }),
    message: opt(text),
  })
  .map(defined);
const outcome = fc
  .record({
    workflowId: text,
    actionIndex: count,
    attempt: count,
    actionState: actionStateArb,
    workflowState: actionStateArb,
    deadlineMs: opt(count),
    notBeforeMs: opt(count),
  })
  .map(defined);
const controlResult: fc.Arbitrary<ControlResult> = fc
  .oneof(
    fc
      .record({ code: fc.constantFrom(...controlErrorCodes), message: text })
      .map((c) => ({ type: 'error' as const, ...c })),
    fc
      .record({
        input: hardwareInput,
        workerTokenSha256: text,
        createdMs: count,
        updatedMs: count,
        version: count,
      })
      .map(({ input, workerTokenSha256, ...rest }) => ({
        type: 'hardware' as const,
        hardware: { ...input, workerTokenSha256, ...rest },
      })),
    fc
      .record({ name: text, source: text, createdMs: count, updatedMs: count, version: count })
      .map((template) => ({ type: 'template' as const, template })),
    workflow.map((w) => ({ type: 'workflow' as const, workflow: w })),
    outcome.map((o) => ({ type: 'attempt' as const, ...o })),
    outcome.map((o) => ({ type: 'duplicate' as const, ...o })),
    fc
      .record({
        name: text,
        role: fc.constantFrom('admin' as const, 'viewer' as const),
        sha256: text,
        createdMs: count,
      })
      .map((token) => ({ type: 'token' as const, token })),
    fc.constant({ type: 'deleted' as const }),
  )
  .map(plain);

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
  fc
    .tuple(count, session, controlCommand)
    .map(([stampMs, s, c]): Command => ({ type: 'control', stampMs, command: c, ...optional('session', s) })),
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
  controlResult.map((r): CommandResult => ({ type: 'control', result: r })),
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
        // A control payload version above this build's is a newer build's entry: apply stops.
        if (e instanceof EntryTooNewError) return;
        assert.ok(e instanceof DecodeError, `unexpected ${String(e)}`);
        assert.match(e.message, / at byte \d+$|^(unsupported|unknown|invalid|registerClient|noop|control)/);
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

// ---- the control type ----

const controlBytes = (json: string, payloadVersion = 1): Uint8Array =>
  new BinaryWriter().u8(1).u8(4).uvarint(7).u8(0).u8(payloadVersion).string(json).finish();

test('the control type leaves the encodings of the earlier types unchanged', () => {
  // Byte layouts written out from the format comment, not from the encoder.
  const put: Command = {
    type: 'put',
    stampMs: 300,
    ns: 'n',
    key: 'k',
    value: Uint8Array.of(9),
    prevRevision: 2,
  };
  assert.deepEqual([...encodeCommand(put)], [1, 2, 0xac, 0x02, 0b10, 1, 0x6e, 1, 0x6b, 1, 9, 2]);
  assert.deepEqual([...encodeCommand({ type: 'noop', stampMs: 5 })], [1, 0, 5, 0]);
  assert.deepEqual([...encodeResult({ type: 'noop', revision: 3 })], [1, 1, 3]);
  const control: Command = { type: 'control', stampMs: 7, command: { type: 'workflow.delete', id: 'w' } };
  const json = '{"type":"workflow.delete","id":"w"}';
  assert.deepEqual(encodeCommand(control), controlBytes(json));
  assert.deepEqual(decodeCommand(controlBytes(json)), control);
});

test('a control payload must be canonical JSON of a known command, refused with the field named', () => {
  const cases: [string, RegExp][] = [
    ['{"id":"w","type":"workflow.delete"}', /not in canonical form/],
    ['{"type":"workflow.delete", "id":"w"}', /not in canonical form/],
    ['{"type":"workflow.delete","id":"w","extra":1}', /unknown field "extra"/],
    ['{"type":"workflow.nuke","id":"w"}', /^invalid control command: type: must be one of hardware\.put/],
    ['{"type":"workflow.delete"}', /id: is required/],
    ['{"type":"workflow.retry","id":"w","fromStart":1}', /fromStart: must be true or false, got 1/],
    [
      '{"type":"attempt.start","workflowId":"w","actionIndex":-1,"attempt":1,"workerId":"m"}',
      /actionIndex: must be in \[0,/,
    ],
    [
      '{"type":"attempt.start","workflowId":"w","actionIndex":1.5,"attempt":1,"workerId":"m"}',
      /actionIndex: must be an integer/,
    ],
    ['{"type":"hardware.delete","id":"\\ud800"}', /id: contains an unpaired UTF-16 surrogate/],
    ['[1]', /type: must be one of/],
    ['{', /not JSON/],
  ];
  for (const [json, why] of cases) {
    assert.throws(
      () => decodeCommand(controlBytes(json)),
      (e: unknown) => e instanceof DecodeError && why.test(e.message),
      json,
    );
  }
  assert.throws(
    () => decodeCommand(controlBytes('{"type":"workflow.delete","id":"w"}', 2)),
    /control command workflow.delete is written at version 2, not 1/,
  );
  assert.throws(
    () => decodeCommand(controlBytes('{"type":"workflow.delete","id":"w"}', 0)),
    /unsupported control payload version 0/,
  );
  assert.throws(
    () => decodeCommand(controlBytes('{"type":"workflow.delete","id":"w"}', stateVersionOfThisBuild + 1)),
    (e: unknown) => e instanceof EntryTooNewError && /run a newer build on this node/.test(e.message),
  );
  const withPrev = new BinaryWriter().u8(1).u8(4).uvarint(7).u8(0b10).finish();
  assert.throws(() => decodeCommand(withPrev), /control cannot carry a prevRevision/);
});

test('encodeCommand refuses a malformed or oversized control command, naming the field', () => {
  const bad = { type: 'token.put', name: 'n', role: 'root', sha256: 'x' } as unknown as ControlCommand;
  assert.throws(
    () => encodeCommand({ type: 'control', stampMs: 1, command: bad }),
    (e: unknown) =>
      e instanceof InvalidCommandError &&
      /role: must be one of admin, operator, viewer, got "root"/.test(e.message),
  );
  const huge: ControlCommand = {
    type: 'template.put',
    name: 't',
    source: 'x'.repeat(controlCommandBytesMax),
  };
  assert.throws(
    () => encodeCommand({ type: 'control', stampMs: 1, command: huge }),
    /over the limit of 1048576/,
  );
  assert.equal(
    commandProblem({ type: 'control', stampMs: 1, command: huge })?.includes('over the limit'),
    true,
  );
});

test('control payloads sort map keys, so equal commands have equal bytes whatever the key order', () => {
  const a: ControlCommand = { type: 'workflow.cancel', id: 'w', message: 'm' };
  const b = { message: 'm', id: 'w', type: 'workflow.cancel' } as const;
  assert.deepEqual(
    encodeCommand({ type: 'control', stampMs: 1, command: a }),
    encodeCommand({ type: 'control', stampMs: 1, command: b }),
  );
  const env = (e: Record<string, string>): ControlCommand => ({
    type: 'workflow.create',
    id: 'w',
    template: 't',
    templateVersion: 1,
    hardwareId: 'h',
    hardwareMap: e,
    spec: { version: '0.1', name: 't', globalTimeoutS: 1, tasks: [] },
  });
  assert.deepEqual(
    encodeCommand({ type: 'control', stampMs: 1, command: env({ b: '2', a: '1' }) }),
    encodeCommand({ type: 'control', stampMs: 1, command: env({ a: '1', b: '2' }) }),
  );
});

test('a control result with a bad payload is refused by decodeResult', () => {
  const bytes = (json: string) => new BinaryWriter().u8(1).u8(5).u8(1).string(json).finish();
  assert.deepEqual(decodeResult(bytes('{"type":"deleted"}')), {
    type: 'control',
    result: { type: 'deleted' },
  });
  assert.throws(
    () => decodeResult(bytes('{"type":"error","code":"E_NOPE","message":""}')),
    /invalid control result: code: must be one of/,
  );
  assert.throws(() => decodeResult(bytes('{"type":"deleted","x":1}')), /unknown field "x"/);
});
