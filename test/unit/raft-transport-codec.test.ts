// Goal: the raft wire codec is exact and strict: every core message type survives
// core → wire → bytes → wire → core unchanged, and anything malformed from the network is
// refused with a CodecError naming the offending field, before it can reach the core.
// Method: a hand-built example of each message type plus a fast-check property over random
// valid messages for the round trip; hand-altered wire values and raw bytes for rejection.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import {
  message,
  type Entry,
  type EntryType,
  type Message,
  type MessageType,
  type SnapshotMeta,
} from '../../src/raft/core/types.js';
import {
  CodecError,
  decodeEnvelope,
  encodeMessageFrame,
  messageFromWire,
  messageToWire,
} from '../../src/raft/transport/codec.js';
import {
  EntryType as WireEntryType,
  MessageType as WireMessageType,
  type Message as WireMessage,
} from '../../src/gen/raft.js';

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

const meta: SnapshotMeta = {
  index: 900,
  term: 12,
  membership: {
    voters: [
      { id: 'n1', addr: '127.0.0.1:7001', apiAddr: '127.0.0.1:8001' },
      { id: 'n2', addr: '[::1]:7002', apiAddr: '' },
    ],
    learners: [{ id: 'n4', addr: '127.0.0.1:7004', apiAddr: '127.0.0.1:8004' }],
  },
};

/** One realistic message of each type, using the fields types.ts assigns to it. */
function example(type: MessageType): Message {
  const base = { type, from: 'n1', to: 'n2', term: 12 };
  switch (type) {
    case 'app':
      return message({
        ...base,
        index: 40,
        logTerm: 11,
        commit: 39,
        entries: [
          { term: 11, index: 41, type: 'normal', data: new Uint8Array([1, 2, 3]) },
          { term: 12, index: 42, type: 'noop', data: new Uint8Array() },
          { term: 12, index: 43, type: 'conf', data: new Uint8Array([9, 8]) },
        ],
      });
    case 'appResp':
      return message({ ...base, index: 40, reject: true, rejectHint: 35, logTerm: 10 });
    case 'vote':
    case 'preVote':
      return message({ ...base, index: 77, logTerm: 11, transfer: true });
    case 'voteResp':
    case 'preVoteResp':
      return message({ ...base, reject: true });
    case 'heartbeat':
      return message({ ...base, commit: 39, context: 5 });
    case 'heartbeatResp':
    case 'readIndex':
    case 'readIndexResp':
      return message({ ...base, context: 6, reject: type === 'readIndexResp' });
    case 'snap':
      return message({ ...base, index: meta.index, snapshot: meta });
    case 'timeoutNow':
      return message(base);
    default: {
      const unknown: never = type;
      throw new Error(`no example for ${String(unknown)}`);
    }
  }
}

/** Decoded entries carry Buffers; compare them as plain bytes. */
function plain(msg: Message): Message {
  return { ...msg, entries: msg.entries.map((e) => ({ ...e, data: new Uint8Array(e.data) })) };
}

function throughBytes(msg: Message): Message {
  const wire = decodeEnvelope(encodeMessageFrame(msg));
  assert.equal(wire.length, 1);
  return plain(messageFromWire(wire[0]!));
}

void describe('raft transport codec: round trip', () => {
  for (const type of allTypes) {
    void it(`keeps a '${type}' message unchanged through the wire`, () => {
      const msg = example(type);
      assert.deepEqual(plain(messageFromWire(messageToWire(msg))), msg);
      assert.deepEqual(throughBytes(msg), msg);
    });
  }

  void it('decodes frames joined end to end as one envelope, in order', () => {
    const msgs = allTypes.map(example);
    const joined = Buffer.concat(msgs.map(encodeMessageFrame));
    assert.deepEqual(
      decodeEnvelope(joined).map((w) => plain(messageFromWire(w))),
      msgs,
    );
  });

  void it('round-trips random valid messages', () => {
    const counter = fc.nat({ max: Number.MAX_SAFE_INTEGER });
    // Plain prototypes, as the decoder produces, so deepEqual compares values only.
    const plainRecord = { noNullPrototype: true } as const;
    const id = fc.string({ minLength: 1, maxLength: 8 });
    const member = fc.record(
      { id, addr: id.map((h) => `${h}:7000`), apiAddr: fc.string({ maxLength: 12 }) },
      plainRecord,
    );
    const snapshotMeta = fc.record(
      {
        index: counter,
        term: counter,
        membership: fc.record(
          { voters: fc.array(member, { maxLength: 3 }), learners: fc.array(member, { maxLength: 2 }) },
          plainRecord,
        ),
      },
      plainRecord,
    );
    const arbitrary = fc
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
                data: fc.uint8Array({ maxLength: 64 }),
              },
              plainRecord,
            ),
            { maxLength: 4 },
          ),
          reject: fc.boolean(),
          rejectHint: counter,
          context: counter,
          snapshot: snapshotMeta,
          transfer: fc.boolean(),
        },
        plainRecord,
      )
      .map(({ entryShapes, snapshot, ...m }): Message => {
        const entries: Entry[] =
          m.type === 'app' ? entryShapes.map((e, i) => ({ ...e, index: m.index + 1 + i })) : [];
        return { ...m, entries, snapshot: m.type === 'snap' ? snapshot : null };
      });
    fc.assert(
      fc.property(arbitrary, (msg) => {
        assert.deepEqual(throughBytes(msg), msg);
      }),
    );
  });
});

void describe('raft transport codec: rejection', () => {
  function wire(overrides: Partial<WireMessage>, type: MessageType = 'heartbeat'): WireMessage {
    return { ...messageToWire(example(type)), ...overrides };
  }

  const cases: readonly (readonly [string, WireMessage, RegExp])[] = [
    ['an unknown message type', wire({ type: 99 as WireMessageType }), /message type 99 is not a known/],
    [
      'the unspecified message type',
      wire({ type: WireMessageType.MESSAGE_TYPE_UNSPECIFIED }),
      /message type 0/,
    ],
    ['a negative term', wire({ term: -1 }), /term must be a non-negative integer, got -1/],
    ['a fractional commit', wire({ commit: 1.5 }), /commit must be a non-negative integer, got 1.5/],
    ['a NaN context', wire({ context: Number.NaN }), /context must be a non-negative integer, got NaN/],
    ['an unsafe index', wire({ index: 2 ** 53 + 2 }), /index must be a non-negative integer/],
    ['an empty sender', wire({ from: '' }), /from must be a non-empty node id/],
    ['an empty recipient', wire({ to: '' }), /to must be a non-empty node id/],
    [
      "a 'snap' without metadata",
      wire({ type: WireMessageType.MESSAGE_TYPE_SNAP }),
      /'snap' message must carry snapshot metadata/,
    ],
    [
      'metadata on a heartbeat',
      wire({ snapshot: messageToWire(example('snap')).snapshot }),
      /'heartbeat' message must not carry snapshot/,
    ],
    [
      'entries on a heartbeat',
      wire({ entries: messageToWire(example('app')).entries }),
      /'heartbeat' message must not carry entries/,
    ],
    [
      'entries not following the previous index',
      wire({ index: 10 }, 'app'),
      /entries\[0\]\.index is 41, expected 11/,
    ],
    [
      'an unknown entry type',
      wire({ entries: [{ term: 1, index: 41, type: 7 as WireEntryType, data: Buffer.alloc(0) }] }, 'app'),
      /entries\[0\]\.type 7 is not a known entry type/,
    ],
    [
      'a negative entry term',
      wire(
        { entries: [{ term: -4, index: 41, type: WireEntryType.ENTRY_TYPE_NORMAL, data: Buffer.alloc(0) }] },
        'app',
      ),
      /entries\[0\]\.term must be a non-negative integer, got -4/,
    ],
    [
      'snapshot metadata without membership',
      wire({ snapshot: { index: 900, term: 12 } }, 'snap'),
      /snapshot\.membership is missing/,
    ],
    [
      'a member without an id',
      wire(
        {
          snapshot: {
            index: 1,
            term: 1,
            membership: { voters: [{ id: '', addr: 'h:1', apiAddr: '' }], learners: [] },
          },
        },
        'snap',
      ),
      /snapshot\.membership\.voters\[0\]\.id must be a non-empty node id/,
    ],
    [
      'a member without an address',
      wire(
        {
          snapshot: {
            index: 1,
            term: 1,
            membership: { voters: [], learners: [{ id: 'n4', addr: '', apiAddr: '' }] },
          },
        },
        'snap',
      ),
      /snapshot\.membership\.learners\[0\]\.addr must be a host:port address/,
    ],
  ];

  for (const [name, bad, expected] of cases) {
    void it(`refuses ${name}`, () => {
      assert.throws(
        () => messageFromWire(bad),
        (err: unknown) => err instanceof CodecError && expected.test(err.message),
      );
    });
  }

  void it('refuses bytes that are not an envelope', () => {
    assert.throws(() => decodeEnvelope(Uint8Array.from([0x0a, 0xff, 0xff])), CodecError);
  });

  void it('refuses a uint64 above 2^53 on the wire', () => {
    // Message { term = 2^60 } inside RaftEnvelope.messages: written by hand, since the
    // generated encoder only takes numbers.
    const inner = new BinaryWriter()
      .uint32(32)
      .uint64(2n ** 60n)
      .finish();
    const envelope = new BinaryWriter().uint32(10).bytes(inner).finish();
    assert.throws(() => decodeEnvelope(envelope), /undecodable raft envelope/);
  });

  void it('refuses to encode an outgoing message with a negative index', () => {
    assert.throws(
      () => encodeMessageFrame({ ...example('vote'), index: -3 }),
      /index must be a non-negative integer, got -3/,
    );
  });
});
