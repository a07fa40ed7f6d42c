// Conversion between the consensus core's plain values (core/types.ts) and the raft wire
// format (proto/raft.proto, generated types in gen/raft.ts). Pure and total: every input either
// converts or throws a CodecError naming the field that is wrong, so nothing malformed from the
// network reaches the core. The hot path (encodeMessageFrame, decodeEnvelopeMessages) writes and
// reads the protobuf bytes directly; the generated code stays the reference it must match.
import { Buffer } from 'node:buffer';
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
import {
  delimitedBytes,
  ProtoReader,
  ProtoWireError,
  ProtoWriter,
  stringBytes,
  varintBytes,
} from './proto-wire.js';

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

/** The wire messages of an envelope, not yet validated (see messageFromWire). */
export function decodeEnvelope(bytes: Uint8Array): WireMessage[] {
  try {
    return RaftEnvelope.decode(bytes).messages;
  } catch (err) {
    throw new CodecError(`undecodable raft envelope of ${bytes.byteLength} bytes: ${String(err)}`);
  }
}

// ---- The hot path: protobuf bytes written and read directly ------------------------------
// Byte for byte what RaftEnvelope.encode writes (fields in number order, proto3 defaults
// left out), and read as RaftEnvelope.decode reads it followed by messageFromWire, with the
// same checks in the same order. Unknown fields are skipped, as the generated reader does.

/** Tags (field number << 3 | wire type) of proto/raft.proto. */
const tagEnvelopeMessage = 10;
const tagType = 8;
const tagFrom = 18;
const tagTo = 26;
const tagTerm = 32;
const tagIndex = 40;
const tagLogTerm = 48;
const tagCommit = 56;
const tagEntry = 66;
const tagReject = 72;
const tagRejectHint = 80;
const tagContext = 88;
const tagSnapshot = 98;
const tagTransfer = 104;
const tagEntryTerm = 8;
const tagEntryIndex = 16;
const tagEntryType = 24;
const tagEntryData = 34;
const tagMetaIndex = 8;
const tagMetaTerm = 16;
const tagMetaMembership = 26;
const tagVoter = 10;
const tagLearner = 18;
const tagMemberId = 10;
const tagMemberAddr = 18;
const tagMemberApiAddr = 26;
/** Every tag above fits in one byte. */
const tagBytes = 1;

function isCounter(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0;
}

/** A uint64 field's size with its tag, or 0 when it holds the default and is left out. */
function uint64FieldBytes(value: number): number {
  return value === 0 ? 0 : tagBytes + varintBytes(value);
}

function stringFieldBytes(byteLength: number): number {
  return byteLength === 0 ? 0 : tagBytes + delimitedBytes(byteLength);
}

function entryBodyBytes(e: Entry, wireType: number): number {
  return (
    uint64FieldBytes(e.term) +
    uint64FieldBytes(e.index) +
    uint64FieldBytes(wireType) +
    (e.data.byteLength === 0 ? 0 : tagBytes + delimitedBytes(e.data.byteLength))
  );
}

function writeUint64Field(w: ProtoWriter, tag: number, value: number): void {
  if (value !== 0) w.varint(tag).varint(value);
}

function memberBodyBytes(m: WireMember): number {
  return (
    stringFieldBytes(stringBytes(m.id)) +
    stringFieldBytes(stringBytes(m.addr)) +
    stringFieldBytes(stringBytes(m.apiAddr))
  );
}

function membershipBodyBytes(m: WireMembership): number {
  let bytes = 0;
  for (const v of m.voters) bytes += tagBytes + delimitedBytes(memberBodyBytes(v));
  for (const l of m.learners) bytes += tagBytes + delimitedBytes(memberBodyBytes(l));
  return bytes;
}

function snapshotMetaBodyBytes(meta: WireSnapshotMeta): number {
  const membership = meta.membership;
  return (
    uint64FieldBytes(meta.index) +
    uint64FieldBytes(meta.term) +
    (membership === undefined ? 0 : tagBytes + delimitedBytes(membershipBodyBytes(membership)))
  );
}

function writeString(w: ProtoWriter, tag: number, value: string): void {
  const bytes = stringBytes(value);
  if (bytes !== 0) w.varint(tag).string(value, bytes);
}

function writeSnapshotMeta(w: ProtoWriter, meta: WireSnapshotMeta): void {
  writeUint64Field(w, tagMetaIndex, meta.index);
  writeUint64Field(w, tagMetaTerm, meta.term);
  const membership = meta.membership;
  if (membership === undefined) return;
  w.varint(tagMetaMembership).varint(membershipBodyBytes(membership));
  for (const [tag, list] of [
    [tagVoter, membership.voters],
    [tagLearner, membership.learners],
  ] as const) {
    for (const m of list) {
      w.varint(tag).varint(memberBodyBytes(m));
      writeString(w, tagMemberId, m.id);
      writeString(w, tagMemberAddr, m.addr);
      writeString(w, tagMemberApiAddr, m.apiAddr);
    }
  }
}

/**
 * One message encoded as a RaftEnvelope holding just it. Repeated fields concatenate on the
 * wire, so a batch of frames joined end to end is itself a valid RaftEnvelope; this lets the
 * transport size its queues and batches in exact bytes. Checks as messageToWire does.
 */
export function encodeMessageFrame(m: Message): Uint8Array {
  checkShape(m.type, m.index, m.entries, m.snapshot !== null);
  const type = messageTypeToWire[m.type];
  // Unreachable for a typed caller; kept because a bad frame must never be written.
  if (type === undefined) throw new CodecError(`message type ${m.type} is not a known raft message type`);
  nodeId(m.from, 'from');
  nodeId(m.to, 'to');
  counter(m.term, 'term');
  counter(m.index, 'index');
  counter(m.logTerm, 'logTerm');
  counter(m.commit, 'commit');
  let entriesBytes = 0;
  for (let i = 0; i < m.entries.length; i++) {
    const e = m.entries[i]!;
    // Field names are built only for the message of an error.
    if (!isCounter(e.term)) counter(e.term, `entries[${i}].term`);
    if (!isCounter(e.index)) counter(e.index, `entries[${i}].index`);
    const entryType = entryTypeToWire[e.type];
    if (entryType === undefined) {
      throw new CodecError(`entries[${i}].type ${e.type} is not a known entry type`);
    }
    entriesBytes += tagBytes + delimitedBytes(entryBodyBytes(e, entryType));
  }
  counter(m.rejectHint, 'rejectHint');
  counter(m.context, 'context');
  const snapshot = m.snapshot === null ? undefined : snapshotMetaToWire(m.snapshot);

  const fromBytes = stringBytes(m.from);
  const toBytes = stringBytes(m.to);
  const messageBytes =
    uint64FieldBytes(type) +
    stringFieldBytes(fromBytes) +
    stringFieldBytes(toBytes) +
    uint64FieldBytes(m.term) +
    uint64FieldBytes(m.index) +
    uint64FieldBytes(m.logTerm) +
    uint64FieldBytes(m.commit) +
    entriesBytes +
    (m.reject ? tagBytes + 1 : 0) +
    uint64FieldBytes(m.rejectHint) +
    uint64FieldBytes(m.context) +
    (snapshot === undefined ? 0 : tagBytes + delimitedBytes(snapshotMetaBodyBytes(snapshot))) +
    (m.transfer ? tagBytes + 1 : 0);

  const w = new ProtoWriter(tagBytes + delimitedBytes(messageBytes));
  w.varint(tagEnvelopeMessage).varint(messageBytes);
  w.varint(tagType).varint(type);
  w.varint(tagFrom).string(m.from, fromBytes);
  w.varint(tagTo).string(m.to, toBytes);
  writeUint64Field(w, tagTerm, m.term);
  writeUint64Field(w, tagIndex, m.index);
  writeUint64Field(w, tagLogTerm, m.logTerm);
  writeUint64Field(w, tagCommit, m.commit);
  for (const e of m.entries) {
    const entryType = entryTypeToWire[e.type];
    w.varint(tagEntry).varint(entryBodyBytes(e, entryType));
    writeUint64Field(w, tagEntryTerm, e.term);
    writeUint64Field(w, tagEntryIndex, e.index);
    writeUint64Field(w, tagEntryType, entryType);
    if (e.data.byteLength !== 0) w.varint(tagEntryData).bytes(e.data);
  }
  if (m.reject) w.varint(tagReject).varint(1);
  writeUint64Field(w, tagRejectHint, m.rejectHint);
  writeUint64Field(w, tagContext, m.context);
  if (snapshot !== undefined) {
    w.varint(tagSnapshot).varint(snapshotMetaBodyBytes(snapshot));
    writeSnapshotMeta(w, snapshot);
  }
  if (m.transfer) w.varint(tagTransfer).varint(1);
  if (w.written !== w.buffer.byteLength) {
    throw new Error(`invariant: raft frame sized ${w.buffer.byteLength} bytes but ${w.written} were written`);
  }
  return w.buffer;
}

/**
 * The messages of an envelope, each checked as messageFromWire checks it: a message that breaks
 * a rule comes back as its CodecError, in its place, so that the rest can still be delivered.
 * Throws a CodecError when the bytes are not a well-formed envelope at all.
 */
export function decodeEnvelopeMessages(bytes: Uint8Array): (Message | CodecError)[] {
  try {
    const r = new ProtoReader(bytes);
    const out: (Message | CodecError)[] = [];
    while (r.offset < r.end) {
      const tag = r.uint32();
      if (tag === tagEnvelopeMessage) out.push(readMessage(r, r.delimited()));
      else skipUnknown(r, tag);
    }
    return out;
  } catch (err) {
    if (!(err instanceof ProtoWireError)) throw err;
    throw new CodecError(`undecodable raft envelope of ${bytes.byteLength} bytes: ${err.message}`);
  }
}

function skipUnknown(r: ProtoReader, tag: number): void {
  const wireType = tag & 7;
  if (tag === 0) throw new ProtoWireError(`tag 0 before byte ${r.offset}`);
  r.skip(wireType);
}

function expectEnd(r: ProtoReader, end: number, what: string): void {
  if (r.offset !== end) throw new ProtoWireError(`a field of ${what} runs past its end at byte ${end}`);
}

function readMessage(r: ProtoReader, end: number): Message | CodecError {
  let wireType = 0;
  let from = '';
  let to = '';
  let term = 0;
  let index = 0;
  let logTerm = 0;
  let commit = 0;
  // Per entry, as read: term, index, type code, and where its data lies in the input.
  const entriesRead: number[] = [];
  let reject = false;
  let rejectHint = 0;
  let context = 0;
  let snapshot: WireSnapshotMeta | undefined;
  let transfer = false;
  while (r.offset < end) {
    const tag = r.uint32();
    switch (tag) {
      case tagType:
        wireType = r.int32();
        break;
      case tagFrom:
        from = r.string();
        break;
      case tagTo:
        to = r.string();
        break;
      case tagTerm:
        term = r.uint64();
        break;
      case tagIndex:
        index = r.uint64();
        break;
      case tagLogTerm:
        logTerm = r.uint64();
        break;
      case tagCommit:
        commit = r.uint64();
        break;
      case tagEntry:
        readEntry(r, r.delimited(), entriesRead);
        break;
      case tagReject:
        reject = r.bool();
        break;
      case tagRejectHint:
        rejectHint = r.uint64();
        break;
      case tagContext:
        context = r.uint64();
        break;
      case tagSnapshot:
        snapshot = readSnapshotMeta(r, r.delimited());
        break;
      case tagTransfer:
        transfer = r.bool();
        break;
      default:
        skipUnknown(r, tag);
    }
  }
  expectEnd(r, end, 'a message');

  // The checks of messageFromWire, in its order; decoded uint64s are always counters.
  const type = messageTypeFromWire.get(wireType);
  if (type === undefined) return new CodecError(`message type ${wireType} is not a known raft message type`);
  try {
    const entries = entriesOf(r, entriesRead);
    checkShape(type, index, entries, snapshot !== undefined);
    nodeId(from, 'from');
    nodeId(to, 'to');
    for (let i = 0; i < entries.length; i++) {
      const code = entriesRead[i * entryReadFields + 2]!;
      if (!entryTypeFromWire.has(code)) {
        throw new CodecError(`entries[${i}].type ${code} is not a known entry type`);
      }
    }
    return {
      type,
      from,
      to,
      term,
      index,
      logTerm,
      commit,
      entries,
      reject,
      rejectHint,
      context,
      snapshot: snapshot === undefined ? null : snapshotMetaFromWire(snapshot),
      transfer,
    };
  } catch (err) {
    if (err instanceof CodecError) return err;
    throw err;
  }
}

/** How many numbers entriesRead holds per entry: term, index, type code, data start, data end. */
const entryReadFields = 5;

/** Reads one Entry submessage into `out` (see entryReadFields); its data stays in the input. */
function readEntry(r: ProtoReader, end: number, out: number[]): void {
  let term = 0;
  let index = 0;
  let code = 0;
  let dataStart = 0;
  let dataEnd = 0;
  while (r.offset < end) {
    const tag = r.uint32();
    switch (tag) {
      case tagEntryTerm:
        term = r.uint64();
        break;
      case tagEntryIndex:
        index = r.uint64();
        break;
      case tagEntryType:
        code = r.int32();
        break;
      case tagEntryData:
        dataStart = r.skipBytes();
        dataEnd = r.offset;
        break;
      default:
        skipUnknown(r, tag);
    }
  }
  expectEnd(r, end, 'an entry');
  out.push(term, index, code, dataStart, dataEnd);
}

/**
 * The entries read, with data of their own: the input range from the first entry's data to the
 * last one's is copied once (the entry headers in between come along, a few bytes each), so
 * that the log does not keep the whole received envelope alive. An unknown type reads as
 * 'normal' here; the caller refuses the message for it.
 */
function entriesOf(r: ProtoReader, read: readonly number[]): Entry[] {
  const entries: Entry[] = [];
  if (read.length === 0) return entries;
  let first = Infinity;
  let last = 0;
  for (let at = 0; at < read.length; at += entryReadFields) {
    if (read[at + 4]! > read[at + 3]!) {
      first = Math.min(first, read[at + 3]!);
      last = Math.max(last, read[at + 4]!);
    }
  }
  const span = last > first ? last - first : 0;
  const copy = Buffer.allocUnsafe(span);
  if (span > 0) r.copyTo(copy, 0, first, last);
  for (let at = 0; at < read.length; at += entryReadFields) {
    const start = read[at + 3]!;
    const length = read[at + 4]! - start;
    entries.push({
      term: read[at]!,
      index: read[at + 1]!,
      type: entryTypeFromWire.get(read[at + 2]!) ?? 'normal',
      data:
        length === 0
          ? new Uint8Array(0)
          : new Uint8Array(copy.buffer, copy.byteOffset + start - first, length),
    });
  }
  return entries;
}

function readSnapshotMeta(r: ProtoReader, end: number): WireSnapshotMeta {
  const meta: WireSnapshotMeta = { index: 0, term: 0 };
  while (r.offset < end) {
    const tag = r.uint32();
    switch (tag) {
      case tagMetaIndex:
        meta.index = r.uint64();
        break;
      case tagMetaTerm:
        meta.term = r.uint64();
        break;
      case tagMetaMembership:
        meta.membership = readMembership(r, r.delimited());
        break;
      default:
        skipUnknown(r, tag);
    }
  }
  expectEnd(r, end, 'snapshot metadata');
  return meta;
}

function readMembership(r: ProtoReader, end: number): WireMembership {
  const membership: WireMembership = { voters: [], learners: [] };
  while (r.offset < end) {
    const tag = r.uint32();
    if (tag === tagVoter) membership.voters.push(readMember(r, r.delimited()));
    else if (tag === tagLearner) membership.learners.push(readMember(r, r.delimited()));
    else skipUnknown(r, tag);
  }
  expectEnd(r, end, 'a membership');
  return membership;
}

function readMember(r: ProtoReader, end: number): WireMember {
  const member: WireMember = { id: '', addr: '', apiAddr: '' };
  while (r.offset < end) {
    const tag = r.uint32();
    if (tag === tagMemberId) member.id = r.string();
    else if (tag === tagMemberAddr) member.addr = r.string();
    else if (tag === tagMemberApiAddr) member.apiAddr = r.string();
    else skipUnknown(r, tag);
  }
  expectEnd(r, end, 'a member');
  return member;
}
