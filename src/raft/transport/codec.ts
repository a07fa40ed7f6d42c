// Conversion between the consensus core's plain values (core/types.ts) and the generated wire
// types (gen/raft.ts). Pure and total: every input either converts or throws a CodecError
// naming the field that is wrong, so nothing malformed from the network reaches the core.
import {
  EntryType as WireEntryType,
  MessageType as WireMessageType,
  RaftEnvelope,
  type Entry as WireEntry,
  type Member as WireMember,
  type Membership as WireMembership,
  type Message as WireMessage,
  type SnapshotMeta as WireSnapshotMeta,
} from '../../gen/raft.js';
import type {
  Entry,
  EntryType,
  Member,
  Membership,
  Message,
  MessageType,
  SnapshotMeta,
} from '../core/types.js';

/** A value that cannot be converted; `message` names the field and the offending value. */
export class CodecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CodecError';
  }
}

const messageTypeToWire: Readonly<Record<MessageType, WireMessageType>> = {
  app: WireMessageType.MESSAGE_TYPE_APP,
  appResp: WireMessageType.MESSAGE_TYPE_APP_RESP,
  vote: WireMessageType.MESSAGE_TYPE_VOTE,
  voteResp: WireMessageType.MESSAGE_TYPE_VOTE_RESP,
  preVote: WireMessageType.MESSAGE_TYPE_PRE_VOTE,
  preVoteResp: WireMessageType.MESSAGE_TYPE_PRE_VOTE_RESP,
  heartbeat: WireMessageType.MESSAGE_TYPE_HEARTBEAT,
  heartbeatResp: WireMessageType.MESSAGE_TYPE_HEARTBEAT_RESP,
  snap: WireMessageType.MESSAGE_TYPE_SNAP,
  timeoutNow: WireMessageType.MESSAGE_TYPE_TIMEOUT_NOW,
  readIndex: WireMessageType.MESSAGE_TYPE_READ_INDEX,
  readIndexResp: WireMessageType.MESSAGE_TYPE_READ_INDEX_RESP,
};

const entryTypeToWire: Readonly<Record<EntryType, WireEntryType>> = {
  normal: WireEntryType.ENTRY_TYPE_NORMAL,
  conf: WireEntryType.ENTRY_TYPE_CONF,
  noop: WireEntryType.ENTRY_TYPE_NOOP,
};

const messageTypeFromWire = invert(messageTypeToWire);
const entryTypeFromWire = invert(entryTypeToWire);

function invert<K extends string>(table: Readonly<Record<K, number>>): ReadonlyMap<number, K> {
  return new Map(Object.entries(table).map(([name, wire]) => [wire as number, name as K]));
}

/** Terms, indexes and round ids are uint64 on the wire and safe integers in memory. */
function counter(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new CodecError(`${field} must be a non-negative integer, got ${String(value)}`);
  }
  return value;
}

function nodeId(value: string, field: string): string {
  if (value === '') throw new CodecError(`${field} must be a non-empty node id`);
  return value;
}

function bytesToWire(data: Uint8Array): Buffer {
  // A view, not a copy: encoding reads it once, right away.
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function memberToWire(m: Member, field: string): WireMember {
  return { id: nodeId(m.id, `${field}.id`), addr: m.addr, apiAddr: m.apiAddr };
}

function memberFromWire(m: WireMember, field: string): Member {
  if (m.addr === '') throw new CodecError(`${field}.addr must be a host:port address`);
  return { id: nodeId(m.id, `${field}.id`), addr: m.addr, apiAddr: m.apiAddr };
}

function membershipToWire(m: Membership): WireMembership {
  return {
    voters: m.voters.map((v, i) => memberToWire(v, `membership.voters[${i}]`)),
    learners: m.learners.map((l, i) => memberToWire(l, `membership.learners[${i}]`)),
  };
}

function membershipFromWire(m: WireMembership | undefined, field: string): Membership {
  if (m === undefined) throw new CodecError(`${field}.membership is missing`);
  return {
    voters: m.voters.map((v, i) => memberFromWire(v, `${field}.membership.voters[${i}]`)),
    learners: m.learners.map((l, i) => memberFromWire(l, `${field}.membership.learners[${i}]`)),
  };
}

export function snapshotMetaToWire(meta: SnapshotMeta): WireSnapshotMeta {
  return {
    index: counter(meta.index, 'snapshot.index'),
    term: counter(meta.term, 'snapshot.term'),
    membership: membershipToWire(meta.membership),
  };
}

export function snapshotMetaFromWire(meta: WireSnapshotMeta, field = 'snapshot'): SnapshotMeta {
  return {
    index: counter(meta.index, `${field}.index`),
    term: counter(meta.term, `${field}.term`),
    membership: membershipFromWire(meta.membership, field),
  };
}

function entryToWire(e: Entry, field: string): WireEntry {
  return {
    term: counter(e.term, `${field}.term`),
    index: counter(e.index, `${field}.index`),
    type: entryTypeToWire[e.type],
    data: bytesToWire(e.data),
  };
}

function entryFromWire(e: WireEntry, field: string): Entry {
  const type = entryTypeFromWire.get(e.type);
  if (type === undefined) throw new CodecError(`${field}.type ${e.type} is not a known entry type`);
  return {
    term: counter(e.term, `${field}.term`),
    index: counter(e.index, `${field}.index`),
    type,
    data: e.data,
  };
}

/**
 * The shape rules both directions share: entries only on 'app' and numbered on from the
 * previous index; snapshot metadata exactly on 'snap'.
 */
function checkShape(
  type: MessageType,
  index: number,
  entries: readonly { index: number }[],
  hasMeta: boolean,
) {
  if (type !== 'app' && entries.length > 0) {
    throw new CodecError(`a '${type}' message must not carry entries (got ${entries.length})`);
  }
  entries.forEach((e, i) => {
    if (e.index !== index + 1 + i) {
      throw new CodecError(
        `entries[${i}].index is ${e.index}, expected ${index + 1 + i} (index + 1 + position)`,
      );
    }
  });
  if (type === 'snap' && !hasMeta) throw new CodecError(`a 'snap' message must carry snapshot metadata`);
  if (type !== 'snap' && hasMeta)
    throw new CodecError(`a '${type}' message must not carry snapshot metadata`);
}

export function messageToWire(m: Message): WireMessage {
  checkShape(m.type, m.index, m.entries, m.snapshot !== null);
  const wire: WireMessage = {
    type: messageTypeToWire[m.type],
    from: nodeId(m.from, 'from'),
    to: nodeId(m.to, 'to'),
    term: counter(m.term, 'term'),
    index: counter(m.index, 'index'),
    logTerm: counter(m.logTerm, 'logTerm'),
    commit: counter(m.commit, 'commit'),
    entries: m.entries.map((e, i) => entryToWire(e, `entries[${i}]`)),
    reject: m.reject,
    rejectHint: counter(m.rejectHint, 'rejectHint'),
    context: counter(m.context, 'context'),
    transfer: m.transfer,
  };
  if (m.snapshot !== null) wire.snapshot = snapshotMetaToWire(m.snapshot);
  return wire;
}

export function messageFromWire(w: WireMessage): Message {
  const type = messageTypeFromWire.get(w.type);
  if (type === undefined) throw new CodecError(`message type ${w.type} is not a known raft message type`);
  checkShape(type, w.index, w.entries, w.snapshot !== undefined);
  return {
    type,
    from: nodeId(w.from, 'from'),
    to: nodeId(w.to, 'to'),
    term: counter(w.term, 'term'),
    index: counter(w.index, 'index'),
    logTerm: counter(w.logTerm, 'logTerm'),
    commit: counter(w.commit, 'commit'),
    entries: w.entries.map((e, i) => entryFromWire(e, `entries[${i}]`)),
    reject: w.reject,
    rejectHint: counter(w.rejectHint, 'rejectHint'),
    context: counter(w.context, 'context'),
    snapshot: w.snapshot === undefined ? null : snapshotMetaFromWire(w.snapshot),
    transfer: w.transfer,
  };
}

/**
 * One message encoded as a RaftEnvelope holding just it. Repeated fields concatenate on the
 * wire, so a batch of frames joined end to end is itself a valid RaftEnvelope; this lets the
 * transport size its queues and batches in exact bytes.
 */
export function encodeMessageFrame(m: Message): Uint8Array {
  return RaftEnvelope.encode({ messages: [messageToWire(m)] }).finish();
}

/** The wire messages of an envelope, not yet validated (see messageFromWire). */
export function decodeEnvelope(bytes: Uint8Array): WireMessage[] {
  try {
    return RaftEnvelope.decode(bytes).messages;
  } catch (err) {
    throw new CodecError(`undecodable raft envelope of ${bytes.byteLength} bytes: ${String(err)}`);
  }
}
