// The control state's snapshot as records (docs/decisions/0023-streamed-snapshots.md): the
// same canonical JSON as the one-document layout (snapshot.ts), cut at record boundaries so a
// large state is written and read a record at a time, in slices between which the event loop
// runs, without ever holding the whole text, its parse tree and its bytes at once.
//
//   string head       the one-document snapshot (format 6) of the state with its collections
//                     left empty: every field beside them, checked by readSnapshot
//   then, in this order, hardware, templates, workflows, tokens, leases, powerJobs, artifacts,
//   audit entries:    uvarint count | count × string record (canonical JSON, as in the document)
//
// Strings are length-prefixed UTF-8 (binary.ts). A record is the canonical JSON its reader
// gives, so equal states give equal bytes; reading holds each record to that and to the order
// and relations the document reader checks. Only a cluster at state version 2 or above writes
// it (the head is format 6), so a build that reads only the document never receives one.
import { BinaryWriter, DecodeError, type BinaryReader } from '../binary.js';
import {
  artifactsMax,
  auditEntriesMax,
  hardwareMax,
  leasesMax,
  operatorTokensMax,
  powerJobsMax,
  templatesMax,
  workflowsMax,
} from '../../model/limits.js';
import { SliceBudget, type Sliced } from '../slices.js';
import { stateVersionBaseline, stateVersionSnapshotRecords } from '../versions.js';
import { deepFreeze } from './immutable.js';
import {
  readArtifact,
  readAuditEntry,
  readHardware,
  readLease,
  readOperatorToken,
  readPowerJob,
  readTemplate,
} from './schema.js';
import { at, ShapeError, type Reader } from './shape.js';
import { readSnapshot, readWorkflowEntry, writeSnapshot } from './snapshot.js';
import { collectionsProblem, snapshotFormat, type SnapshotImage } from './snapshot-format.js';

/** Bytes of records per slice, written or read: about a millisecond of JSON work. */
const recordBytesPerSlice = 32 * 1024;
/** Bytes per piece handed to the caller: large enough that pieces are few. */
const pieceBytes = 256 * 1024;
/** One record's bound: only so that a corrupt length fails fast (a workflow with all its events is a few MB). */
const recordBytesMax = 256 * 1024 * 1024;
/** The head is the document without collections: a few hundred bytes. */
const headBytesMax = 1024 * 1024;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** One collection of the image, in the order the layout holds them. */
interface Section<T> {
  readonly key: string;
  readonly read: Reader<T>;
  readonly lengthMax: number;
  readonly items: (image: SnapshotImage) => readonly T[];
  readonly fill: (image: Mutable<SnapshotImage>, items: readonly T[]) => void;
}

function section<T>(s: Section<T>): Section<unknown> {
  return s as unknown as Section<unknown>;
}

const sections: readonly Section<unknown>[] = [
  section({
    key: 'hardware',
    read: readHardware,
    lengthMax: hardwareMax,
    items: (i) => i.hardware,
    fill: (i, items) => (i.hardware = items),
  }),
  section({
    key: 'templates',
    read: readTemplate,
    lengthMax: templatesMax,
    items: (i) => i.templates,
    fill: (i, items) => (i.templates = items),
  }),
  section({
    key: 'workflows',
    read: readWorkflowEntry,
    lengthMax: workflowsMax,
    items: (i) => i.workflows,
    fill: (i, items) => (i.workflows = items),
  }),
  section({
    key: 'tokens',
    read: readOperatorToken,
    lengthMax: operatorTokensMax,
    items: (i) => i.tokens,
    fill: (i, items) => (i.tokens = items),
  }),
  section({
    key: 'leases',
    read: readLease,
    lengthMax: leasesMax,
    items: (i) => i.leases ?? [],
    fill: (i, items) => (i.leases = items),
  }),
  // Absent when empty, as in the document, so each state has one image.
  section({
    key: 'powerJobs',
    read: readPowerJob,
    lengthMax: powerJobsMax,
    items: (i) => i.powerJobs ?? [],
    fill: (i, items) => {
      if (items.length > 0) i.powerJobs = items;
      else delete i.powerJobs;
    },
  }),
  section({
    key: 'artifacts',
    read: readArtifact,
    lengthMax: artifactsMax,
    items: (i) => i.artifacts ?? [],
    fill: (i, items) => {
      if (items.length > 0) i.artifacts = items;
      else delete i.artifacts;
    },
  }),
  section({
    key: 'audit.entries',
    read: readAuditEntry,
    lengthMax: auditEntriesMax,
    items: (i) => i.audit?.entries ?? [],
    fill: (i, items) => {
      if (i.audit !== undefined) i.audit = { ...i.audit, entries: items };
      else if (items.length > 0)
        throw new DecodeError('control snapshot: audit entries without an audit trail');
    },
  }),
];

/** The image without its collections: what the head holds. */
function headOf(image: SnapshotImage): SnapshotImage {
  return {
    ...image,
    hardware: [],
    templates: [],
    workflows: [],
    tokens: [],
    leases: [],
    powerJobs: [],
    artifacts: [],
    ...(image.audit === undefined ? {} : { audit: { ...image.audit, entries: [] } }),
  };
}

/** True when the image's state may be written as records: its cluster runs at version 2 or above. */
export function recordsAllowed(image: SnapshotImage): boolean {
  return (image.clusterVersion ?? stateVersionBaseline) >= stateVersionSnapshotRecords;
}

/**
 * The records of an image whose collections are sorted by key, in pieces (in order) of about
 * `pieceBytes`, pausing every `recordBytesPerSlice` bytes of records. Throws ShapeError, as
 * writeSnapshot does, for a record its reader refuses.
 */
export function* snapshotRecordSlices(image: SnapshotImage): Sliced<Uint8Array[]> {
  if (!recordsAllowed(image)) {
    throw new ShapeError('clusterVersion', 'records are written only by a cluster at version 2 or above');
  }
  const pieces: Uint8Array[] = [];
  const budget = new SliceBudget(recordBytesPerSlice);
  let w = new BinaryWriter(pieceBytes + 64 * 1024);
  w.bytes(writeSnapshot(headOf(image)));
  for (const s of sections) {
    const items = s.items(image);
    if (items.length > s.lengthMax) {
      throw new ShapeError(s.key, `has ${items.length} items, over the limit of ${s.lengthMax}`);
    }
    w.uvarint(items.length);
    for (let i = 0; i < items.length; i++) {
      const before = w.length;
      w.string(JSON.stringify(s.read(items[i], at(s.key, i))));
      if (w.length >= pieceBytes) {
        pieces.push(w.finish());
        w = new BinaryWriter(pieceBytes + 64 * 1024);
      }
      if (budget.spend(w.length - before > 0 ? w.length - before : 1)) yield;
    }
  }
  pieces.push(w.finish());
  return pieces;
}

/**
 * Reads the records from `r` (up to the end of the control state) into an image, checking
 * each record as the document reader would (shape, canonical form) and then the collections'
 * order and relations. Throws DecodeError naming the problem.
 */
export function* readSnapshotRecords(r: BinaryReader): Sliced<SnapshotImage> {
  const head = readSnapshot(r.bytesView('control snapshot head', headBytesMax));
  if (!recordsAllowed(head)) {
    throw new DecodeError(`control snapshot: the record layout needs a head of format ${snapshotFormat}`);
  }
  const image: Mutable<SnapshotImage> = { ...head };
  const budget = new SliceBudget(recordBytesPerSlice);
  for (const s of sections) {
    if (s.items(head).length > 0) throw new DecodeError(`control snapshot: the head holds ${s.key}`);
    const length = r.uvarint(`${s.key} count`);
    if (length > s.lengthMax) {
      throw new DecodeError(
        `control snapshot: ${s.key} has ${length} items, over the limit of ${s.lengthMax}`,
      );
    }
    const items: unknown[] = [];
    // The records read since the last check, and the one before them (order is pairwise).
    let checkedTo = 0;
    for (let i = 0; i < length; i++) {
      const start = r.offset;
      items.push(readRecord(r.string(`${s.key} record`, recordBytesMax), s.read, at(s.key, i)));
      if (budget.spend(r.offset - start)) {
        check(head, s, items.slice(Math.max(0, checkedTo - 1)));
        checkedTo = items.length;
        yield;
      }
    }
    check(head, s, items.slice(Math.max(0, checkedTo - 1)));
    s.fill(image, items);
  }
  // The trail's checks count all of its entries against its retention: once, whole.
  check(head, auditSection, image.audit?.entries ?? []);
  return deepFreeze(image);
}

const auditSection = sections[sections.length - 1]!;

/**
 * Runs the document reader's checks of collections on `items` of one section (a run of
 * consecutive records: every check but the trail's is of one record or of neighbours).
 */
function check(head: SnapshotImage, s: Section<unknown>, items: readonly unknown[]): void {
  const probe: Mutable<SnapshotImage> = { ...head };
  s.fill(probe, items);
  const problem = collectionsProblem(snapshotFormat, probe);
  if (problem !== undefined) throw new DecodeError(`control snapshot: ${problem}`);
}

/** One record: JSON, accepted by its reader, in canonical form; frozen, as restored records are. */
function readRecord<T>(text: string, read: Reader<T>, path: string): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new DecodeError(
      `control snapshot: ${path} is not JSON (${e instanceof Error ? e.message : String(e)})`,
    );
  }
  let value: T;
  try {
    value = read(parsed, path);
  } catch (e) {
    if (e instanceof ShapeError) throw new DecodeError(`control snapshot: ${e.message}`);
    throw e;
  }
  if (JSON.stringify(value) !== text) {
    throw new DecodeError(`control snapshot: ${path} is not in canonical form`);
  }
  return deepFreeze(value);
}
