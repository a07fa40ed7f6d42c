// The whole replicated state machine a raft node applies: the key-value store (namespaced keys,
// a global revision), client sessions, and the control state (src/state/control) inside it.
//
// Revisions. The store revision starts at 0 and increases by exactly 1 per successful put or
// delete; failed commands, no-ops and session registration leave it alone. It is not the raft
// index (which also counts no-ops, refused commands and configuration changes), so revisions
// are dense, and a key's modRevision strictly increases with each write. That makes them
// fencing tokens: a holder identified by the revision it wrote can be refused once anyone
// writes after it.
//
// Time. The machine's clock is the largest leader stamp applied so far. Taking the maximum
// keeps it monotonic across leader changes with skewed clocks, so session expiry never runs
// backwards.
//
// The control plane. `control` commands go to the ControlState this store owns, at the store's
// clock and inside the same session machinery as puts, so a retried control command is applied
// once. They do not advance the KV revision.
import { BinaryReader, BinaryWriter, DecodeError, stringBytes, uvarintBytes } from './binary.js';
import {
  decodeCommand,
  decodeResult,
  encodeResult,
  errorResult,
  quote,
  type Command,
  type CommandResult,
  type DeleteCommand,
  type PutCommand,
  type VersionedValue,
  type WriteAudit,
} from './store-command.js';
import { stateVersionAuditInEntry } from './versions.js';
import {
  keyBytesMax,
  namespaceBytesMax,
  sessionResultsMaxDefault,
  sessionsMaxDefault,
  sessionTtlMsDefault,
  valueBytesMax,
} from '../model/limits.js';
import type { SnapshotCapture, StateMachine } from '../raft/state-machine.js';
import { SessionTable, type SessionLimits } from './sessions.js';
import { SortedKeys } from './sorted-keys.js';
import { crc32cUpdate } from '../platform/crc32c.js';
import { runAtOnce, runInSlices, SliceBudget, type Sliced } from './slices.js';
import { readSnapshot, snapshotSlices } from './control/snapshot.js';
import type { SnapshotImage } from './control/snapshot-format.js';
import { readSnapshotRecords, recordsAllowed, snapshotRecordSlices } from './control/snapshot-records.js';
import { ControlState } from './control/control-state.js';

/** A change the store made, for watches. */
export interface ChangeEvent {
  readonly revision: number;
  readonly ns: string;
  readonly key: string;
  readonly type: 'put' | 'delete';
  /** The new value, for puts. A copy: the listener may keep it. */
  readonly value?: Uint8Array;
}

export interface KeyValue extends VersionedValue {
  readonly ns: string;
  readonly key: string;
}

export type KvStoreOptions = Partial<SessionLimits>;

/** Snapshot format: "SLKV" then a version byte. See snapshot() for the layout. */
const snapshotMagic = [0x53, 0x4c, 0x4b, 0x56];
/** The control state as one JSON document: written while the cluster runs at state version 1. */
const snapshotVersion = 2;
/** The control state as records (snapshot-records.ts): written at state version 2 and above. */
const snapshotVersionRecords = 3;
/** Version 1 had no control state; it restores with an empty one. */
const snapshotVersionWithoutControl = 1;
/** The control state's snapshot inside ours: bounded only so that a corrupt length fails fast. */
const controlSnapshotBytesMax = 2 ** 31;

interface Namespace {
  readonly values: Map<string, VersionedValue>;
  readonly keys: SortedKeys;
}

/** What a snapshot encodes, captured at one applied index (see captureSnapshot). */
interface StoreCapture {
  readonly appliedIndex: number;
  readonly revision: number;
  readonly nowMs: number;
  readonly sessions: Uint8Array;
  /** Ascending by name; keys ascending, values[i] the value of keys[i]. */
  readonly namespaces: readonly {
    readonly name: string;
    readonly keys: readonly string[];
    readonly values: readonly VersionedValue[];
  }[];
  readonly control: SnapshotImage;
}

/** Keys per slice of a snapshot encoding: about a millisecond of work at small values. */
const keysPerSlice = 2048;
/** Control-state bytes copied and checksummed per slice: well under a millisecond. */
const controlBytesPerSlice = 256 * 1024;
/** Bytes checksummed per slice of a restore: under a millisecond once optimized, a few before. */
const checksumBytesPerSlice = 256 * 1024;

interface Effect {
  readonly result: CommandResult;
  readonly change?: ChangeEvent;
}

export class ReplicatedState implements StateMachine {
  /**
   * Called after each change is applied, once the whole command is done. Set by the integrator
   * (watches). It runs inside apply, so it must be quick and must not throw.
   */
  onChange?: (event: ChangeEvent) => void;

  /** The control plane's state. The integrator queries it and sets its hooks. */
  readonly control = new ControlState();

  readonly #limits: SessionLimits;
  #appliedIndex = 0;
  #revision = 0;
  #nowMs = 0;
  #sessions: SessionTable;
  #namespaces = new Map<string, Namespace>();

  constructor(options: KvStoreOptions = {}) {
    const limits: SessionLimits = {
      sessionTtlMs: options.sessionTtlMs ?? sessionTtlMsDefault,
      sessionsMax: options.sessionsMax ?? sessionsMaxDefault,
      sessionResultsMax: options.sessionResultsMax ?? sessionResultsMaxDefault,
    };
    for (const [name, value] of Object.entries(limits)) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(
          `ReplicatedState option ${name} must be a positive integer, got ${String(value)}`,
        );
      }
    }
    this.#limits = limits;
    this.#sessions = new SessionTable(limits);
  }

  get appliedIndex(): number {
    return this.#appliedIndex;
  }

  /** The store revision: the number of successful mutations so far. */
  get revision(): number {
    return this.#revision;
  }

  /** The machine's clock: the largest leader stamp applied so far, in ms since the epoch. */
  get nowMs(): number {
    return this.#nowMs;
  }

  get sessionCount(): number {
    return this.#sessions.size;
  }

  hasSession(clientId: number): boolean {
    return this.#sessions.has(clientId);
  }

  apply(index: number, command: Uint8Array): Uint8Array {
    if (!Number.isSafeInteger(index) || index <= this.#appliedIndex) {
      throw new Error(`apply index ${index} must be an integer above appliedIndex ${this.#appliedIndex}`);
    }
    let decoded: Command;
    try {
      decoded = decodeCommand(command);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      this.#appliedIndex = index;
      return encodeResult(errorResult('E_BAD_COMMAND', `entry ${index}: ${e.message}`));
    }
    this.#appliedIndex = index;
    const audited = decoded.type === 'put' || decoded.type === 'delete' ? decoded.audit : undefined;
    if (audited !== undefined && this.control.clusterVersion < stateVersionAuditInEntry) {
      // Proposers never write it below that version; one that slipped past them changes nothing
      // here, alike on every node that can read it (docs/decisions/0019).
      return encodeResult(
        errorResult(
          'E_BAD_COMMAND',
          `entry ${index}: a write carrying its audit record needs cluster version ${stateVersionAuditInEntry}, and the cluster runs at ${this.control.clusterVersion}`,
        ),
      );
    }
    this.#nowMs = Math.max(this.#nowMs, decoded.stampMs);
    this.#sessions.expire(this.#nowMs);

    if (decoded.type === 'registerClient') {
      this.#sessions.register(index, this.#nowMs);
      return encodeResult({ type: 'registerClient', clientId: index });
    }
    if (audited === undefined) return this.#applyInSession(index, decoded).bytes;
    const { bytes, result } = this.#applyInSession(index, decoded);
    this.#recordWrite(decoded as PutCommand | DeleteCommand, audited, result ?? decodeResult(bytes));
    return bytes;
  }

  /**
   * Runs a command through its client's session, if it has one: a duplicate gets the cached
   * result (its bytes only), a fresh command is executed once.
   */
  #applyInSession(
    index: number,
    command: Exclude<Command, { type: 'registerClient' }>,
  ): { bytes: Uint8Array; result?: CommandResult } {
    const tag = command.session;
    if (tag === undefined) {
      const effect = this.#execute(index, command);
      return { bytes: this.#finish(effect), result: effect.result };
    }
    const admission = this.#sessions.admit(tag, this.#nowMs);
    switch (admission.type) {
      case 'expired': {
        const result = errorResult(
          'E_SESSION_EXPIRED',
          `session ${tag.clientId} is unknown or expired; register a new client`,
        );
        return { bytes: encodeResult(result), result };
      }
      case 'duplicate':
        return { bytes: admission.result };
      case 'refused': {
        const result = errorResult('E_BAD_COMMAND', admission.message);
        return { bytes: encodeResult(result), result };
      }
      case 'fresh': {
        const effect = this.#execute(index, command);
        const bytes = encodeResult(effect.result);
        this.#sessions.record(tag, bytes);
        this.#notify(effect);
        return { bytes, result: effect.result };
      }
      default:
        return unreachable(admission);
    }
  }

  /** An audited write goes into the trail with its outcome, from its own entry (state version 3). */
  #recordWrite(command: PutCommand | DeleteCommand, audit: WriteAudit, result: CommandResult): void {
    this.control.recordCall(
      {
        user: audit.user,
        role: audit.role,
        address: audit.address,
        method: audit.method,
        kind: audit.kind,
        target: command.key,
        ...(result.type === 'error' ? { error: { code: result.code, message: result.message } } : {}),
      },
      this.#nowMs,
    );
  }

  /** The value of one key, or undefined. The returned value is a copy. */
  get(ns: string, key: string): KeyValue | undefined {
    const stored = this.#namespaces.get(ns)?.values.get(key);
    return stored === undefined ? undefined : toKeyValue(ns, key, stored);
  }

  /**
   * Up to `limit` keys of the namespace that start with `prefix` (empty: all), in ascending
   * key order. O(log n + limit). Ask for limit + 1 to learn whether more remain.
   */
  range(ns: string, prefix: string, limit: number): KeyValue[] {
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`range limit must be a positive integer, got ${limit}`);
    }
    const space = this.#namespaces.get(ns);
    const out: KeyValue[] = [];
    if (space === undefined) return out;
    for (const key of space.keys.from(prefix)) {
      if (!key.startsWith(prefix) || out.length >= limit) break;
      out.push(toKeyValue(ns, key, space.values.get(key)!));
    }
    return out;
  }

  /** Keys in one namespace, or in the whole store when `ns` is omitted. */
  count(ns?: string): number {
    if (ns !== undefined) return this.#namespaces.get(ns)?.keys.size ?? 0;
    let total = 0;
    for (const space of this.#namespaces.values()) total += space.keys.size;
    return total;
  }

  /** Namespaces that hold at least one key, ascending. */
  namespaces(): string[] {
    return [...this.#namespaces.keys()].sort(compareStrings);
  }

  /**
   * Layout, version 2 (varints and strings as in command.ts):
   *   "SLKV" | u8 version | uvarint appliedIndex | uvarint revision | uvarint nowMs
   *   sessions (see SessionTable.write)
   *   uvarint namespaceCount, then per namespace ascending: string ns | uvarint keyCount, then per
   *     key ascending: string key | bytes value | uvarint createRevision | modRevision | version
   *   bytes control state (ControlState.snapshot: canonical JSON)
   *   u32 CRC-32C (little-endian) of everything before it
   * Version 1 is the same without the control state. Version 3, written once the cluster runs
   * at state version 2 (an older build never receives it), holds the control state as records
   * instead (snapshot-records.ts, no length before them: they run to the checksum), so that it
   * is written and restored a record at a time (docs/decisions/0023-streamed-snapshots.md).
   * Namespaces and keys are written in sorted order, so equal states give equal bytes whatever
   * order the writes arrived in.
   */
  snapshot(): Uint8Array {
    return runAtOnce(this.#snapshotSlices(this.#capture()));
  }

  /**
   * The state as of now, encoded later in slices (the same bytes snapshot() gives now): values
   * are replaced on write, never changed in place, so the capture holds references to them in
   * fresh arrays. Costs a pass over the keys, not an encoding.
   */
  captureSnapshot(): SnapshotCapture {
    const capture = this.#capture();
    return {
      appliedIndex: capture.appliedIndex,
      encode: (pause) => runInSlices(this.#snapshotSlices(capture), pause),
    };
  }

  #capture(): StoreCapture {
    const sessionsWriter = new BinaryWriter(256);
    this.#sessions.write(sessionsWriter);
    return {
      appliedIndex: this.#appliedIndex,
      revision: this.#revision,
      nowMs: this.#nowMs,
      sessions: sessionsWriter.written(),
      namespaces: this.namespaces().map((name) => {
        const space = this.#namespaces.get(name)!;
        const keys = [...space.keys];
        return { name, keys, values: keys.map((key) => space.values.get(key)!) };
      }),
      control: this.control.captureImage(),
    };
  }

  *#snapshotSlices(c: StoreCapture): Sliced<Uint8Array> {
    const records = recordsAllowed(c.control);
    const control = records ? yield* snapshotRecordSlices(c.control) : yield* snapshotSlices(c.control);
    let controlLength = 0;
    for (const piece of control) controlLength += piece.length;
    const budget = new SliceBudget(keysPerSlice);
    // Sized exactly before writing: a snapshot can be many megabytes, and growing the buffer,
    // trimming it and appending the checksum would copy all of it several times.
    let size =
      snapshotMagic.length +
      1 +
      uvarintBytes(c.appliedIndex) +
      uvarintBytes(c.revision) +
      uvarintBytes(c.nowMs) +
      c.sessions.length +
      uvarintBytes(c.namespaces.length) +
      (records ? 0 : uvarintBytes(controlLength)) +
      controlLength +
      4;
    for (const { name, keys, values } of c.namespaces) {
      size += stringBytes(name) + uvarintBytes(keys.length);
      for (let i = 0; i < keys.length; i++) {
        const v = values[i]!;
        size += stringBytes(keys[i]!) + uvarintBytes(v.value.length) + v.value.length;
        size += uvarintBytes(v.createRevision) + uvarintBytes(v.modRevision) + uvarintBytes(v.version);
        if (budget.spend()) yield;
      }
    }

    const w = new BinaryWriter(size);
    // The checksum is carried along slice by slice rather than taken over megabytes at the end.
    let crc = 0;
    let checked = 0;
    w.raw(Uint8Array.from(snapshotMagic)).u8(records ? snapshotVersionRecords : snapshotVersion);
    w.uvarint(c.appliedIndex).uvarint(c.revision).uvarint(c.nowMs);
    w.raw(c.sessions);
    w.uvarint(c.namespaces.length);
    for (const { name, keys, values } of c.namespaces) {
      w.string(name).uvarint(keys.length);
      for (let i = 0; i < keys.length; i++) {
        const v = values[i]!;
        w.string(keys[i]!).bytes(v.value).uvarint(v.createRevision).uvarint(v.modRevision).uvarint(v.version);
        if (budget.spend()) {
          crc = crc32cUpdate(crc, w.written(), checked, w.length);
          checked = w.length;
          yield;
        }
      }
    }
    // The control state's bytes (one length-prefixed document, or records to the end), copied
    // and checked in slices.
    if (!records) w.uvarint(controlLength);
    const bytesBudget = new SliceBudget(controlBytesPerSlice);
    for (const piece of control) {
      w.raw(piece);
      if (bytesBudget.spend(piece.length)) {
        crc = crc32cUpdate(crc, w.written(), checked, w.length);
        checked = w.length;
        yield;
      }
    }
    w.u32(crc32cUpdate(crc, w.written(), checked, w.length));
    return w.finish();
  }

  restore(data: Uint8Array): void {
    withSnapshotContext(() => runAtOnce(this.#restoreSlices(data)))();
  }

  /**
   * restore() in slices, awaiting `pause` between them, so that restoring a large state does
   * not hold the event loop (heartbeats, requests). The state is checked whole before any of it
   * is replaced, at the end and in one step; nothing may be applied meanwhile.
   */
  async restoreInSlices(data: Uint8Array, pause: () => Promise<void>): Promise<void> {
    let install: () => void;
    try {
      install = await runInSlices(this.#restoreSlices(data), pause);
    } catch (e) {
      throw snapshotError(e);
    }
    install();
  }

  /** Decodes and checks a snapshot; returns the step that installs it. Touches no live state. */
  *#restoreSlices(data: Uint8Array): Sliced<() => void> {
    if (data.length < snapshotMagic.length + 1 + 4) throw new DecodeError(`only ${data.length} bytes`);
    if (!snapshotMagic.every((b, i) => data[i] === b)) throw new DecodeError('missing the SLKV magic');
    const body = data.subarray(0, data.length - 4);
    const stored = new DataView(data.buffer, data.byteOffset + body.length, 4).getUint32(0, true);
    let actual = 0;
    for (let at = 0; at < body.length; at += checksumBytesPerSlice) {
      actual = crc32cUpdate(actual, body, at, Math.min(body.length, at + checksumBytesPerSlice));
      yield;
    }
    if (stored !== actual) {
      throw new DecodeError(
        `checksum mismatch (stored ${stored.toString(16)}, computed ${actual.toString(16)})`,
      );
    }
    const r = new BinaryReader(body);
    r.raw(snapshotMagic.length, 'magic');
    const version = r.u8('snapshot version');
    if (version < snapshotVersionWithoutControl || version > snapshotVersionRecords) {
      throw new DecodeError(
        `unsupported snapshot version ${version} (this build reads ${snapshotVersionWithoutControl} to ${snapshotVersionRecords})`,
      );
    }
    const appliedIndex = r.uvarint('appliedIndex');
    const revision = r.uvarint('revision');
    const nowMs = r.uvarint('nowMs');
    const sessions = SessionTable.read(r, this.#limits, nowMs, appliedIndex);
    const namespaces = yield* readNamespaces(r, revision);
    let image: SnapshotImage;
    if (version === snapshotVersionRecords) {
      image = yield* readSnapshotRecords(r);
    } else if (version === snapshotVersion) {
      // One JSON document, parsed in one go: a snapshot of a cluster still at state version 1.
      image = readSnapshot(r.bytesView('control state', controlSnapshotBytesMax));
      yield;
    } else {
      image = emptyControlImage;
    }
    r.end('snapshot');
    const installControl = yield* this.control.prepareImageRestoreSlices(image);
    // Everything decoded and checked: only the returned step replaces the live state.
    return () => {
      this.#appliedIndex = appliedIndex;
      this.#revision = revision;
      this.#nowMs = nowMs;
      this.#sessions = sessions;
      this.#namespaces = namespaces;
      installControl();
    };
  }

  #execute(index: number, command: Exclude<Command, { type: 'registerClient' }>): Effect {
    switch (command.type) {
      case 'noop':
        return { result: { type: 'noop', revision: this.#revision } };
      case 'control':
        return {
          result: { type: 'control', result: this.control.apply(index, this.#nowMs, command.command) },
        };
      case 'put':
        return this.#put(command);
      case 'delete':
        return this.#delete(command);
      default:
        return unreachable(command);
    }
  }

  #put(command: PutCommand): Effect {
    const { ns, key, value, prevRevision } = command;
    const space = this.#namespaces.get(ns);
    const existing = space?.values.get(key);
    if (prevRevision !== undefined && (existing?.modRevision ?? 0) !== prevRevision) {
      return { result: casFailed(ns, key, prevRevision, existing) };
    }
    const revision = ++this.#revision;
    const stored: VersionedValue = {
      value,
      createRevision: existing?.createRevision ?? revision,
      modRevision: revision,
      version: (existing?.version ?? 0) + 1,
    };
    const target = space ?? this.#createNamespace(ns);
    target.values.set(key, stored);
    if (existing === undefined) target.keys.add(key);
    return {
      result: existing === undefined ? { type: 'put', revision } : { type: 'put', revision, prev: existing },
      // The stored value itself: #notify copies it only when someone listens.
      change: { revision, ns, key, type: 'put', value },
    };
  }

  #delete(command: DeleteCommand): Effect {
    const { ns, key, prevRevision } = command;
    const space = this.#namespaces.get(ns);
    const existing = space?.values.get(key);
    if (space === undefined || existing === undefined) {
      return { result: errorResult('E_NOT_FOUND', `key ${quote(ns)}/${quote(key)} does not exist`) };
    }
    if (prevRevision !== undefined && existing.modRevision !== prevRevision) {
      return { result: casFailed(ns, key, prevRevision, existing) };
    }
    const revision = ++this.#revision;
    space.values.delete(key);
    space.keys.delete(key);
    // Empty namespaces are dropped so that snapshots of equal contents are equal.
    if (space.keys.size === 0) this.#namespaces.delete(ns);
    return {
      result: { type: 'delete', revision, prev: existing },
      change: { revision, ns, key, type: 'delete' },
    };
  }

  #createNamespace(ns: string): Namespace {
    const space: Namespace = { values: new Map(), keys: new SortedKeys() };
    this.#namespaces.set(ns, space);
    return space;
  }

  #finish(effect: Effect): Uint8Array {
    const result = encodeResult(effect.result);
    this.#notify(effect);
    return result;
  }

  #notify(effect: Effect): void {
    const change = effect.change;
    if (change === undefined || this.onChange === undefined) return;
    this.onChange(change.value === undefined ? change : { ...change, value: change.value.slice() });
  }
}

const emptyControlImage = readSnapshot(new ControlState().snapshot());

/** Runs `decode`, naming a DecodeError as the snapshot's. */
function withSnapshotContext<T>(decode: () => T): T {
  try {
    return decode();
  } catch (e) {
    throw snapshotError(e);
  }
}

function snapshotError(e: unknown): unknown {
  return e instanceof DecodeError ? new DecodeError(`invalid snapshot: ${e.message}`) : e;
}

/** The namespaces of a snapshot, checked (order, revisions against the store's), in slices. */
function* readNamespaces(r: BinaryReader, revision: number): Sliced<Map<string, Namespace>> {
  const budget = new SliceBudget(keysPerSlice);
  const namespaces = new Map<string, Namespace>();
  const namespaceCount = r.uvarint('namespace count');
  let previousName: string | undefined;
  for (let i = 0; i < namespaceCount; i++) {
    const name = r.string('namespace', namespaceBytesMax);
    if (previousName !== undefined && !(previousName < name)) {
      throw new DecodeError(`namespace ${quote(name)} is out of order`);
    }
    previousName = name;
    const keyCount = r.uvarint('key count');
    if (keyCount < 1) throw new DecodeError(`namespace ${quote(name)} is empty`);
    const keys: string[] = [];
    const values = new Map<string, VersionedValue>();
    for (let j = 0; j < keyCount; j++) {
      const key = r.string('key', keyBytesMax);
      const value = r.bytes('value', valueBytesMax);
      const createRevision = r.uvarint('createRevision');
      const modRevision = r.uvarint('modRevision');
      const version = r.uvarint('version');
      const consistent =
        createRevision >= 1 &&
        modRevision >= createRevision &&
        modRevision <= revision &&
        version >= 1 &&
        version <= modRevision - createRevision + 1;
      if (!consistent) {
        throw new DecodeError(
          `key ${quote(name)}/${quote(key)} has inconsistent revisions (create ${createRevision}, mod ${modRevision}, version ${version}, store ${revision})`,
        );
      }
      const last = keys[keys.length - 1];
      if (last !== undefined && !(last < key)) throw new DecodeError(`key ${quote(key)} is out of order`);
      keys.push(key);
      values.set(key, { value, createRevision, modRevision, version });
      if (budget.spend()) yield;
    }
    namespaces.set(name, { values, keys: SortedKeys.fromSorted(keys) });
  }
  return namespaces;
}

function casFailed(
  ns: string,
  key: string,
  expected: number,
  existing: VersionedValue | undefined,
): CommandResult {
  const want = expected === 0 ? 'to be absent' : `at modRevision ${expected}`;
  const found = existing === undefined ? 'it is absent' : `it is at modRevision ${existing.modRevision}`;
  return errorResult('E_CAS_FAILED', `key ${quote(ns)}/${quote(key)} expected ${want}, but ${found}`);
}

function toKeyValue(ns: string, key: string, v: VersionedValue): KeyValue {
  return {
    ns,
    key,
    value: v.value.slice(),
    createRevision: v.createRevision,
    modRevision: v.modRevision,
    version: v.version,
  };
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}
