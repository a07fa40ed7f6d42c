// The on-disk records of the raft log: one binary record per entry, and small checksummed
// JSON envelopes for the hard state, the snapshot metadata and the snapshot data header.
// Decoding never throws on bad bytes: it returns which check failed, so the store can tell a
// torn tail write from corruption in the middle of the log.
import { Buffer } from 'node:buffer';
import type { Entry, EntryType, HardState, Member, Membership, SnapshotMeta } from '../core/types.js';
import { crc32c } from '../../platform/crc32c.js';

/**
 * Entry record, format version 1, big-endian:
 *   0 version u8 | 1 term u64 | 9 index u64 | 17 type u8 | 18 data length u32 | 22 data | crc32c u32
 * The CRC covers every byte before it. u64 fields hold integers up to 2^53 - 1 (JS-safe).
 */
const entryFormatVersion = 1;
const entryHeaderBytes = 22;
const checksumBytes = 4;
const dataBytesMax = 0xffffffff;
const twoPow32 = 0x1_0000_0000;

const entryTypeCodes: Readonly<Record<EntryType, number>> = { normal: 0, conf: 1, noop: 2 };
const entryTypesByCode: readonly EntryType[] = ['normal', 'conf', 'noop'];

/** Which check a record failed. size, length and checksum mean damaged bytes (a torn write
 *  or bit rot); the others mean intact bytes the reader does not accept. */
export type RecordCheck =
  'size' | 'length' | 'checksum' | 'version' | 'kind' | 'type' | 'range' | 'json' | 'shape';

export interface RecordError {
  readonly check: RecordCheck;
  readonly message: string;
}

export type Decoded<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: RecordError };

/** True when the failed check means the bytes themselves are damaged, as a torn write leaves them. */
export function isDamagedBytes(check: RecordCheck): boolean {
  return check === 'size' || check === 'length' || check === 'checksum';
}

function fail<T>(check: RecordCheck, message: string): Decoded<T> {
  return { ok: false, error: { check, message } };
}

function readU32(b: Uint8Array, at: number): number {
  return ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
}

/** Reads a u64 field, or returns -1 when it exceeds 2^53 - 1. */
function readSafeU64(b: Uint8Array, at: number): number {
  const hi = readU32(b, at);
  if (hi > 0x1fffff) return -1;
  return hi * twoPow32 + readU32(b, at + 4);
}

function writeU64(target: Buffer, value: number, at: number): void {
  target.writeUInt32BE(Math.floor(value / twoPow32), at);
  target.writeUInt32BE(value >>> 0, at + 4);
}

function isCount(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

function checkCount(what: string, n: unknown): void {
  if (!isCount(n)) throw new RangeError(`${what} must be a non-negative safe integer, got ${String(n)}`);
}

/** Throws a clear error for an entry that cannot be stored; used before any byte is written. */
export function assertStorableEntry(e: Entry): void {
  checkCount('entry index', e.index);
  checkCount(`term of entry ${e.index}`, e.term);
  if (!Object.hasOwn(entryTypeCodes, e.type)) {
    throw new RangeError(`entry ${e.index} has unknown type ${JSON.stringify(e.type)}`);
  }
  if (!(e.data instanceof Uint8Array)) throw new TypeError(`entry ${e.index} data must be a Uint8Array`);
  if (e.data.byteLength > dataBytesMax) {
    throw new RangeError(
      `entry ${e.index} data is ${e.data.byteLength} bytes, over the ${dataBytesMax} limit`,
    );
  }
}

/** The size of an entry's record, so a caller can encode a whole batch into one allocation. */
export function entryRecordBytes(e: Entry): number {
  return entryHeaderBytes + e.data.byteLength + checksumBytes;
}

/** Writes the entry's record at target[offset] and returns the offset just past it.
 *  The entry must have passed assertStorableEntry. */
export function encodeEntryInto(e: Entry, target: Buffer, offset: number): number {
  const dataBytes = e.data.byteLength;
  target[offset] = entryFormatVersion;
  writeU64(target, e.term, offset + 1);
  writeU64(target, e.index, offset + 9);
  target[offset + 17] = entryTypeCodes[e.type];
  target.writeUInt32BE(dataBytes, offset + 18);
  target.set(e.data, offset + entryHeaderBytes);
  const end = offset + entryHeaderBytes + dataBytes;
  target.writeUInt32BE(crc32c(target, offset, end), end);
  return end + checksumBytes;
}

export function encodeEntry(e: Entry): Buffer {
  assertStorableEntry(e);
  const record = Buffer.allocUnsafe(entryRecordBytes(e));
  encodeEntryInto(e, record, 0);
  return record;
}

/** Decodes an entry record. The entry's data is a view into `record`, not a copy. */
export function decodeEntry(record: Uint8Array): Decoded<Entry> {
  const size = record.byteLength;
  if (size < entryHeaderBytes + checksumBytes) {
    return fail(
      'size',
      `record is ${size} bytes, shorter than the ${entryHeaderBytes + checksumBytes}-byte minimum`,
    );
  }
  const dataBytes = readU32(record, 18);
  const expectedSize = entryHeaderBytes + dataBytes + checksumBytes;
  const stored = readU32(record, size - checksumBytes);
  if (crc32c(record, 0, size - checksumBytes) !== stored) {
    // A length that disagrees with the size is the more precise diagnosis of a cut record.
    if (record[0] === entryFormatVersion && expectedSize !== size) {
      return fail(
        'length',
        `record is ${size} bytes but its header announces ${dataBytes} data bytes (${expectedSize} in all)`,
      );
    }
    return fail('checksum', 'checksum mismatch');
  }
  if (record[0] !== entryFormatVersion) {
    return fail(
      'version',
      `unsupported entry format version ${record[0]} (this build reads ${entryFormatVersion})`,
    );
  }
  if (expectedSize !== size) {
    return fail(
      'length',
      `record is ${size} bytes but its header announces ${dataBytes} data bytes (${expectedSize} in all)`,
    );
  }
  const type = entryTypesByCode[record[17]!];
  if (type === undefined) return fail('type', `unknown entry type code ${record[17]}`);
  const term = readSafeU64(record, 1);
  const index = readSafeU64(record, 9);
  if (term < 0 || index < 0) return fail('range', 'term or index exceeds 2^53 - 1');
  return {
    ok: true,
    value: { term, index, type, data: record.subarray(entryHeaderBytes, entryHeaderBytes + dataBytes) },
  };
}

// ---- Small records: a checksummed envelope around JSON ----------------------------------
// 0 version u8 | 1 kind u8 | 2 payload length u32 | 6 UTF-8 JSON | crc32c u32 over all before.
// The kind byte keeps one record from being read as another if keys were ever mixed up.

const envelopeFormatVersion = 1;
const envelopeHeaderBytes = 6;
const kindHardState = 0x68; // 'h'
const kindSnapshotMeta = 0x6d; // 'm'
const kindSnapshotData = 0x64; // 'd'

function encodeEnvelope(kind: number, value: unknown): Buffer {
  const json = JSON.stringify(value);
  const payloadBytes = Buffer.byteLength(json, 'utf8');
  const record = Buffer.allocUnsafe(envelopeHeaderBytes + payloadBytes + checksumBytes);
  record[0] = envelopeFormatVersion;
  record[1] = kind;
  record.writeUInt32BE(payloadBytes, 2);
  record.write(json, envelopeHeaderBytes, 'utf8');
  const end = envelopeHeaderBytes + payloadBytes;
  record.writeUInt32BE(crc32c(record, 0, end), end);
  return record;
}

function decodeEnvelope(record: Uint8Array, kind: number): Decoded<unknown> {
  const size = record.byteLength;
  if (size < envelopeHeaderBytes + checksumBytes) {
    return fail(
      'size',
      `record is ${size} bytes, shorter than the ${envelopeHeaderBytes + checksumBytes}-byte minimum`,
    );
  }
  const payloadBytes = readU32(record, 2);
  const expectedSize = envelopeHeaderBytes + payloadBytes + checksumBytes;
  if (crc32c(record, 0, size - checksumBytes) !== readU32(record, size - checksumBytes)) {
    if (record[0] === envelopeFormatVersion && expectedSize !== size) {
      return fail(
        'length',
        `record is ${size} bytes but its header announces a ${payloadBytes}-byte payload`,
      );
    }
    return fail('checksum', 'checksum mismatch');
  }
  if (record[0] !== envelopeFormatVersion) {
    return fail(
      'version',
      `unsupported record format version ${record[0]} (this build reads ${envelopeFormatVersion})`,
    );
  }
  if (record[1] !== kind) {
    return fail('kind', `record kind ${record[1]} is not the expected ${kind}`);
  }
  if (expectedSize !== size) {
    return fail('length', `record is ${size} bytes but its header announces a ${payloadBytes}-byte payload`);
  }
  const text = Buffer.from(record.buffer, record.byteOffset + envelopeHeaderBytes, payloadBytes).toString(
    'utf8',
  );
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return fail('json', `payload is not JSON: ${(err as Error).message}`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---- Hard state --------------------------------------------------------------------------

export function assertStorableHardState(hs: HardState): void {
  checkCount('hard state term', hs.term);
  checkCount('hard state commit', hs.commit);
  if (typeof hs.vote !== 'string') throw new TypeError('hard state vote must be a string');
}

export function encodeHardState(hs: HardState): Buffer {
  assertStorableHardState(hs);
  return encodeEnvelope(kindHardState, { term: hs.term, vote: hs.vote, commit: hs.commit });
}

export function decodeHardState(record: Uint8Array): Decoded<HardState> {
  const d = decodeEnvelope(record, kindHardState);
  if (!d.ok) return d;
  const v = d.value;
  if (!isObject(v) || !isCount(v['term']) || !isCount(v['commit']) || typeof v['vote'] !== 'string') {
    return fail('shape', 'hard state needs non-negative integer term and commit and a string vote');
  }
  return { ok: true, value: { term: v['term'], vote: v['vote'], commit: v['commit'] } };
}

// ---- Snapshot metadata -------------------------------------------------------------------

function isMember(v: unknown): v is Member {
  return (
    isObject(v) &&
    typeof v['id'] === 'string' &&
    v['id'] !== '' &&
    typeof v['addr'] === 'string' &&
    typeof v['apiAddr'] === 'string'
  );
}

function copyMembers(list: readonly Member[]): Member[] {
  return list.map((m) => ({ id: m.id, addr: m.addr, apiAddr: m.apiAddr }));
}

export function assertStorableSnapshotMeta(meta: SnapshotMeta): void {
  checkCount('snapshot index', meta.index);
  checkCount('snapshot term', meta.term);
  const ms: Membership | undefined = meta.membership;
  for (const role of ['voters', 'learners'] as const) {
    const list: unknown = ms?.[role];
    if (!Array.isArray(list)) throw new TypeError(`snapshot membership.${role} must be an array`);
    list.forEach((m: unknown, i) => {
      if (!isMember(m)) {
        throw new TypeError(
          `snapshot membership.${role}[${i}] needs a non-empty id and string addr and apiAddr`,
        );
      }
    });
  }
}

export function encodeSnapshotMeta(meta: SnapshotMeta): Buffer {
  assertStorableSnapshotMeta(meta);
  return encodeEnvelope(kindSnapshotMeta, {
    index: meta.index,
    term: meta.term,
    membership: {
      voters: copyMembers(meta.membership.voters),
      learners: copyMembers(meta.membership.learners),
    },
  });
}

export function decodeSnapshotMeta(record: Uint8Array): Decoded<SnapshotMeta> {
  const d = decodeEnvelope(record, kindSnapshotMeta);
  if (!d.ok) return d;
  const v = d.value;
  if (!isObject(v) || !isCount(v['index']) || !isCount(v['term']) || !isObject(v['membership'])) {
    return fail('shape', 'snapshot meta needs non-negative integer index and term and a membership object');
  }
  const voters = v['membership']['voters'];
  const learners = v['membership']['learners'];
  if (
    !Array.isArray(voters) ||
    !Array.isArray(learners) ||
    !voters.every(isMember) ||
    !learners.every(isMember)
  ) {
    return fail('shape', 'snapshot membership needs voters and learners arrays of {id, addr, apiAddr}');
  }
  return {
    ok: true,
    value: {
      index: v['index'],
      term: v['term'],
      membership: { voters: copyMembers(voters), learners: copyMembers(learners) },
    },
  };
}

// ---- Snapshot data header ----------------------------------------------------------------

/** Describes the snapshot bytes stored in chunks beside it; ties them to the metadata's index. */
export interface SnapshotDataHeader {
  readonly index: number;
  readonly term: number;
  readonly bytes: number;
  readonly chunks: number;
  readonly crc32c: number;
  /** Which chunk keys hold the bytes; 0 (absent in older headers) for the first layout. */
  readonly generation: number;
}

export function encodeSnapshotDataHeader(h: SnapshotDataHeader): Buffer {
  return encodeEnvelope(kindSnapshotData, {
    index: h.index,
    term: h.term,
    bytes: h.bytes,
    chunks: h.chunks,
    crc32c: h.crc32c,
    // Generation 0 is the first layout's, whose headers had no such field: written as they were.
    ...(h.generation === 0 ? {} : { generation: h.generation }),
  });
}

export function decodeSnapshotDataHeader(record: Uint8Array): Decoded<SnapshotDataHeader> {
  const d = decodeEnvelope(record, kindSnapshotData);
  if (!d.ok) return d;
  const v = d.value;
  if (
    !isObject(v) ||
    !isCount(v['index']) ||
    !isCount(v['term']) ||
    !isCount(v['bytes']) ||
    !isCount(v['chunks']) ||
    !isCount(v['crc32c']) ||
    v['crc32c'] > 0xffffffff ||
    (v['generation'] !== undefined && (!isCount(v['generation']) || v['generation'] > 0xffffffff))
  ) {
    return fail(
      'shape',
      'snapshot data header needs non-negative integer index, term, bytes, chunks, crc32c and generation',
    );
  }
  return {
    ok: true,
    value: {
      index: v['index'],
      term: v['term'],
      bytes: v['bytes'],
      chunks: v['chunks'],
      crc32c: v['crc32c'],
      generation: v['generation'] ?? 0,
    },
  };
}
