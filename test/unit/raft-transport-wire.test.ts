// Goal: the raft transport's hand-written protobuf path (encodeMessageFrame,
// decodeEnvelopeMessages) is the generated code's exact twin: the same bytes out, the same
// messages and the same refusals in, unknown fields skipped, and received entries that do not
// alias the envelope they arrived in.
// Method: fast-check properties over random valid messages compare every byte with
// RaftEnvelope.encode(messageToWire(m)) and every decoded message with
// decodeEnvelope + messageFromWire; hand-built wire values cover each refusal; random
// mutations of valid frames check that whatever the fast reader accepts, the generated reader
// reads the same way.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import {
  EntryType as WireEntryType,
  MessageType as WireMessageType,
  RaftEnvelope,
  type Message as WireMessage,
} from '../../src/gen/raft.js';
import {
  message,
  type Entry,
  type EntryType,
  type Message,
  type MessageType,
} from '../../src/raft/core/types.js';
import {
  CodecError,
  decodeEnvelope,
  decodeEnvelopeMessages,
  encodeMessageFrame,
  messageFromWire,
  messageToWire,
} from '../../src/raft/transport/codec.js';
import { ProtoReader, ProtoWireError, varintBytes } from '../../src/raft/transport/proto-wire.js';

const allTypes: readonly MessageType[] = [
  'app',
  'appResp',
  'vote',
  'voteResp',
  'preVote',
  'preVoteResp',
  'heartbeat',
  'heartbeatResp',
  'snap',
  'timeoutNow',
  'readIndex',
  'readIndexResp',
];

const plainRecord = { noNullPrototype: true } as const;
const counter = fc.oneof(fc.nat({ max: 300 }), fc.nat({ max: Number.MAX_SAFE_INTEGER }));
const id = fc.oneof(fc.constantFrom('n1', 'n2', 'node-three'), fc.string({ minLength: 1, maxLength: 8 }));
const member = fc.record(
  { id, addr: id.map((h) => `${h}:7000`), apiAddr: fc.string({ maxLength: 12 }) },
  plainRecord,
);

/** Random valid core messages, each type with the fields the codec allows it. */
const validMessage: fc.Arbitrary<Message> = fc
  .record(
    {
      type: fc.constantFrom(...allTypes),
      from: id,
      to: id,
      term: counter,
      index: fc.nat({ max: 1e12 }),
      logTerm: counter,
      commit: counter,
      entryShapes: fc.array(
        fc.record(
          {
            term: counter,
            type: fc.constantFrom<EntryType>('normal', 'conf', 'noop'),
            data: fc.uint8Array({ maxLength: 300 }),
          },
          plainRecord,
        ),
        { maxLength: 5 },
      ),
      reject: fc.boolean(),
      rejectHint: counter,
      context: counter,
      snapshot: fc.record(
        {
          index: counter,
          term: counter,
          membership: fc.record(
            { voters: fc.array(member, { maxLength: 3 }), learners: fc.array(member, { maxLength: 2 }) },
            plainRecord,
          ),
        },
        plainRecord,
      ),
      transfer: fc.boolean(),
    },
    plainRecord,
  )
  .map(({ entryShapes, snapshot, ...m }): Message => {
    const entries: Entry[] =
      m.type === 'app' ? entryShapes.map((e, i) => ({ ...e, index: m.index + 1 + i })) : [];
    return { ...m, entries, snapshot: m.type === 'snap' ? snapshot : null };
  });

function referenceFrame(m: Message): Uint8Array {
  return RaftEnvelope.encode({ messages: [messageToWire(m)] }).finish();
}

/** Compares decoded entries as plain bytes, whatever Uint8Array subclass carries them. */
function plain(m: Message): Message {
  return { ...m, entries: m.entries.map((e) => ({ ...e, data: new Uint8Array(e.data) })) };
}

type Outcome = { envelopeError: true } | { envelopeError: false; messages: (Message | string)[] };

/** What the generated reader plus messageFromWire make of some bytes. */
function reference(bytes: Uint8Array): Outcome {
  let wire: WireMessage[];
  try {
    wire = decodeEnvelope(bytes);
  } catch {
    return { envelopeError: true };
  }
  return {
    envelopeError: false,
    messages: wire.map((w) => {
      try {
        return plain(messageFromWire(w));
      } catch (err) {
        if (err instanceof CodecError) return err.message;
        throw err;
      }
    }),
  };
}

/** What the hand-written reader makes of the same bytes. */
function fast(bytes: Uint8Array): Outcome {
  let read: (Message | CodecError)[];
  try {
    read = decodeEnvelopeMessages(bytes);
  } catch (err) {
    assert.ok(err instanceof CodecError, `expected a CodecError, got ${String(err)}`);
    return { envelopeError: true };
  }
  return {
    envelopeError: false,
    messages: read.map((m) => (m instanceof CodecError ? m.message : plain(m))),
  };
}

void describe('raft transport wire: encoding', () => {
  void it('writes exactly the bytes the generated encoder writes', () => {
    fc.assert(
      fc.property(validMessage, (m) => {
        assert.deepEqual(new Uint8Array(encodeMessageFrame(m)), referenceFrame(m));
      }),
      { numRuns: 500 },
    );
  });

  void it('writes non-ASCII node ids and addresses as UTF-8, as the generated encoder does', () => {
    const m = message({
      type: 'snap',
      from: 'nœud-1',
      to: '节点2',
      term: 2,
      index: 5,
      snapshot: {
        index: 5,
        term: 2,
        membership: { voters: [{ id: 'nœud-1', addr: 'hôte:1', apiAddr: '' }], learners: [] },
      },
    });
    assert.deepEqual(new Uint8Array(encodeMessageFrame(m)), referenceFrame(m));
  });

  void it('refuses what messageToWire refuses, with the same message', () => {
    const good = message({ type: 'app', from: 'n1', to: 'n2', term: 3, index: 4, commit: 4 });
    const bad: Message[] = [
      { ...good, from: '' },
      { ...good, to: '' },
      { ...good, term: -1 },
      { ...good, commit: 1.5 },
      { ...good, context: Number.NaN },
      { ...good, rejectHint: 2 ** 53 },
      { ...good, entries: [{ term: -2, index: 5, type: 'normal', data: new Uint8Array() }] },
      { ...good, entries: [{ term: 2, index: 7, type: 'normal', data: new Uint8Array() }] },
      {
        ...good,
        type: 'heartbeat',
        entries: [{ term: 2, index: 5, type: 'normal', data: new Uint8Array() }],
      },
      { ...good, type: 'snap' },
    ];
    for (const m of bad) {
      let expected = '';
      try {
        messageToWire(m);
      } catch (err) {
        expected = (err as Error).message;
      }
      assert.notEqual(expected, '', `messageToWire accepted ${JSON.stringify(m)}`);
      assert.throws(
        () => encodeMessageFrame(m),
        (err: unknown) => err instanceof CodecError && err.message === expected,
      );
    }
  });
});

void describe('raft transport wire: decoding', () => {
  void it('reads random valid envelopes as the generated reader does', () => {
    fc.assert(
      fc.property(fc.array(validMessage, { minLength: 1, maxLength: 4 }), (msgs) => {
        const bytes = Buffer.concat(msgs.map(encodeMessageFrame));
        const out = fast(bytes);
        assert.deepEqual(out, reference(bytes));
        assert.deepEqual(out, { envelopeError: false, messages: msgs });
      }),
      { numRuns: 300 },
    );
  });

  void it('gives each refused message its CodecError in place and keeps the others', () => {
    const heartbeat = (context: number, to = 'b'): WireMessage =>
      messageToWire(message({ type: 'heartbeat', from: 'a', to, term: 1, context }));
    const app = messageToWire(
      message({
        type: 'app',
        from: 'a',
        to: 'b',
        term: 2,
        index: 10,
        entries: [{ term: 2, index: 11, type: 'normal', data: new Uint8Array([1]) }],
      }),
    );
    const snap = messageToWire(
      message({
        type: 'snap',
        from: 'a',
        to: 'b',
        term: 2,
        index: 9,
        snapshot: { index: 9, term: 2, membership: { voters: [], learners: [] } },
      }),
    );
    const cases: WireMessage[] = [
      { ...heartbeat(1), type: 99 as WireMessageType },
      { ...heartbeat(2), type: WireMessageType.MESSAGE_TYPE_UNSPECIFIED },
      { ...heartbeat(3), type: WireMessageType.MESSAGE_TYPE_SNAP },
      { ...heartbeat(4), from: '' },
      { ...heartbeat(5), to: '' },
      { ...heartbeat(6), entries: app.entries },
      { ...heartbeat(7), snapshot: snap.snapshot },
      { ...app, index: 3 },
      { ...app, entries: [{ ...app.entries[0]!, type: 7 as WireEntryType }] },
      { ...app, from: '', entries: [{ ...app.entries[0]!, type: 7 as WireEntryType }] },
      { ...snap, snapshot: { index: 9, term: 2 } },
      {
        ...snap,
        snapshot: {
          index: 9,
          term: 2,
          membership: { voters: [{ id: '', addr: 'h:1', apiAddr: '' }], learners: [] },
        },
      },
      {
        ...snap,
        snapshot: {
          index: 9,
          term: 2,
          membership: { voters: [], learners: [{ id: 'n4', addr: '', apiAddr: '' }] },
        },
      },
    ];
    const bytes = RaftEnvelope.encode({ messages: [heartbeat(100), ...cases, heartbeat(101)] }).finish();
    const out = fast(bytes);
    assert.deepEqual(out, reference(bytes));
    assert.equal(out.envelopeError, false);
    if (out.envelopeError) return;
    assert.equal(out.messages.length, cases.length + 2);
    const [first, ...rest] = out.messages;
    const last = rest.pop();
    assert.equal(typeof first === 'string' ? first : first?.context, 100);
    assert.equal(typeof last === 'string' ? last : last?.context, 101);
    assert.ok(
      rest.every((m) => typeof m === 'string'),
      'every bad message is refused',
    );
  });

  void it('refuses a uint64 above 2^53 as the generated reader does', () => {
    const inner = new BinaryWriter()
      .uint32(32)
      .uint64(2n ** 60n)
      .finish();
    const bytes = new BinaryWriter().uint32(10).bytes(inner).finish();
    assert.deepEqual(fast(bytes), { envelopeError: true });
    assert.deepEqual(reference(bytes), { envelopeError: true });
  });

  void it('refuses truncated and overrunning envelopes', () => {
    const frame = encodeMessageFrame(
      message({
        type: 'app',
        from: 'n1',
        to: 'n2',
        term: 1,
        index: 0,
        entries: [{ term: 1, index: 1, type: 'normal', data: new Uint8Array(20) }],
      }),
    );
    for (let cut = 1; cut < frame.byteLength; cut++) {
      assert.throws(() => decodeEnvelopeMessages(frame.subarray(0, cut)), CodecError, `cut at ${cut}`);
    }
    assert.throws(() => decodeEnvelopeMessages(Uint8Array.from([0x0a, 0xff, 0xff])), CodecError);
    assert.throws(() => decodeEnvelopeMessages(Uint8Array.from([0x00])), /tag 0/);
  });

  void it('skips fields it does not know, as a newer peer might add them', () => {
    const m = message({
      type: 'app',
      from: 'n1',
      to: 'n2',
      term: 4,
      index: 7,
      commit: 6,
      entries: [{ term: 4, index: 8, type: 'normal', data: new Uint8Array([5, 6]) }],
    });
    const unknown = (w: BinaryWriter): BinaryWriter =>
      w
        .uint32((50 << 3) | 0)
        .uint64(123456789012n)
        .uint32((51 << 3) | 2)
        .bytes(new Uint8Array([1, 2, 3]))
        .uint32((52 << 3) | 5)
        .fixed32(7)
        .uint32((53 << 3) | 1)
        .fixed64(9n)
        // A known field number with the wrong wire type is skipped too.
        .uint32((4 << 3) | 2)
        .bytes(new Uint8Array([9]));
    const entry = unknown(new BinaryWriter().uint32(8).uint64(4).uint32(16).uint64(8).uint32(24).int32(1))
      .uint32(34)
      .bytes(new Uint8Array([5, 6]))
      .finish();
    const inner = unknown(
      new BinaryWriter()
        .uint32(8)
        .int32(1)
        .uint32(18)
        .string('n1')
        .uint32(26)
        .string('n2')
        .uint32(32)
        .uint64(4),
    )
      .uint32(40)
      .uint64(7)
      .uint32(56)
      .uint64(6)
      .uint32(66)
      .bytes(entry)
      .finish();
    const bytes = unknown(new BinaryWriter().uint32(10).bytes(inner)).finish();
    const out = fast(bytes);
    assert.deepEqual(out, reference(bytes));
    assert.deepEqual(out, { envelopeError: false, messages: [m] });
  });

  void it('reads mutated frames the way the generated reader does whenever it accepts them', () => {
    const mutated = fc
      .tuple(
        validMessage,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 3 }),
        fc.nat(),
      )
      .map(([m, flips, cut]) => {
        const bytes = new Uint8Array(encodeMessageFrame(m));
        for (const [at, value] of flips) bytes[at % bytes.length] = value;
        return bytes.subarray(0, bytes.length - (cut % 3 === 0 ? cut % bytes.length : 0));
      });
    let accepted = 0;
    fc.assert(
      fc.property(mutated, (bytes) => {
        const out = fast(bytes);
        if (out.envelopeError) return;
        accepted++;
        assert.deepEqual(out, reference(bytes));
      }),
      { numRuns: 2000 },
    );
    assert.ok(accepted > 100, `only ${accepted} mutated frames were accepted: the property proved little`);
  });

  void it('gives received entries their own bytes, not views of the envelope', () => {
    const frame = new Uint8Array(
      encodeMessageFrame(
        message({
          type: 'app',
          from: 'n1',
          to: 'n2',
          term: 1,
          index: 0,
          entries: [
            { term: 1, index: 1, type: 'normal', data: new Uint8Array([1, 2, 3]) },
            { term: 1, index: 2, type: 'normal', data: new Uint8Array([4, 5]) },
          ],
        }),
      ),
    );
    const [m] = decodeEnvelopeMessages(frame);
    assert.ok(m !== undefined && !(m instanceof CodecError));
    frame.fill(0);
    assert.deepEqual(
      m.entries.map((e) => [...e.data]),
      [
        [1, 2, 3],
        [4, 5],
      ],
    );
    assert.notEqual(m.entries[0]!.data.buffer, frame.buffer);
  });
});

void describe('raft transport wire: primitives', () => {
  void it('sizes and reads back varints across the safe integer range', () => {
    fc.assert(
      fc.property(fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: Number.MAX_SAFE_INTEGER })), (n) => {
        const bytes = new BinaryWriter().uint64(n).finish();
        assert.equal(varintBytes(n), bytes.length);
        const r = new ProtoReader(bytes);
        assert.equal(r.uint64(), n);
        assert.equal(r.offset, bytes.length);
      }),
    );
  });

  void it('refuses a varint longer than 10 bytes', () => {
    const r = new ProtoReader(new Uint8Array(11).fill(0x80));
    assert.throws(() => r.uint64(), ProtoWireError);
  });
});
