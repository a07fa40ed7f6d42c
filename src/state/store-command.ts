// The commands the replicated key-value store applies, the results it returns, and their
// compact versioned binary encoding. Commands travel inside raft entries and results are cached
// in client sessions, so both encodings are part of the replicated state and must be stable.
//
// Command, version 1:
//   u8 version (1) | u8 type | uvarint stampMs | u8 flags (bit 0 session, bit 1 prevRevision,
//   bit 2 audit)
//   [session: uvarint clientId | uvarint seq | uvarint ackedSeq]
//   put:    string ns | string key | bytes value | [uvarint prevRevision] | [audit]
//   delete: string ns | string key | [uvarint prevRevision] | [audit]
//   audit:  string user | u8 role (0 admin, 1 operator, 2 viewer) | string address | string method
//           | string kind: who asked, recorded with the outcome by apply (state version 3)
//   control: u8 payload version | string JSON of a ControlCommand (control/codec.ts); the payload
//            version is the state version the command needs (versions.ts), 1 for most
// Result, version 1:
//   u8 version (1) | u8 type
//   error:  string code | string message
//   put:    uvarint revision | u8 hasPrev | [prev]      delete: uvarint revision | prev
//   registerClient: uvarint clientId                    noop:   uvarint revision
//   control: u8 payload version (1) | string JSON of a ControlResult
//   prev:   bytes value | uvarint createRevision | uvarint modRevision | uvarint version
// Strings are a uvarint byte length then UTF-8; bytes are a uvarint length then the bytes.
// The control type came later: its tag (4, and 5 for its result) is new, so every earlier
// command and result keeps its bytes. The control plane's JSON has its own version byte so its
// schema can change without touching the framing. The audit flag came with state version 3
// (versions.ts stateVersionAuditInEntry): apply refuses it in a cluster below that version, and
// builds of version 2 and before never see it, since they stop at the entry raising the
// cluster to 3 (docs/decisions/0019).
import { BinaryReader, BinaryWriter, DecodeError, stringBytes, uvarintBytes } from './binary.js';
import { isWellFormed, utf8Length, headUtf8 } from '../platform/utf8-text.js';
import {
  decodeControlCommand,
  decodeControlResult,
  encodeControlCommand,
  encodeControlResult,
} from './control/codec.js';
import type { ControlCommand, ControlResult } from './control/commands.js';
import { controlCommandVersion, EntryTooNewError, stateVersionOfThisBuild } from './versions.js';
import { ShapeError } from './control/shape.js';
import type { AuditTag } from './control/audit-log.js';
import type { Role } from '../model/records.js';
import {
  auditTextBytesMax,
  controlCommandBytesMax,
  controlResultBytesMax,
  errorMessageBytesMax,
  keyBytesMax,
  namespaceBytesMax,
  resultBytesMax,
  valueBytesMax,
} from '../model/limits.js';

export const commandCodecVersion = 1;
export const resultCodecVersion = 1;
/** The version of the JSON schema inside control commands and results. */
export const controlPayloadVersion = 1;

/**
 * Exactly-once bookkeeping (dissertation §6.3). `seq` numbers a client's commands from 1;
 * `ackedSeq` says the client has received every result up to it, so they can be discarded.
 */
export interface SessionTag {
  readonly clientId: number;
  readonly seq: number;
  readonly ackedSeq: number;
}

interface CommandBase {
  /** Milliseconds since the epoch, stamped by the leader when it proposed the entry: apply's only clock. */
  readonly stampMs: number;
  /** Absent for commands that need no deduplication (leader no-ops, idempotent tooling). */
  readonly session?: SessionTag;
}

/**
 * Who asked for a write and as what call: apply records it in the audit trail with the write's
 * outcome, in the same entry (state version 3). The key is the record's target.
 */
export interface WriteAudit extends AuditTag {
  /** The call's kind in the trail: kv.put, kv.delete, kv.compareAndSet. */
  readonly kind: string;
}

export interface PutCommand extends CommandBase {
  readonly type: 'put';
  readonly ns: string;
  readonly key: string;
  readonly value: Uint8Array;
  /** Compare-and-set on the key's modRevision; 0 means the key must not exist. */
  readonly prevRevision?: number;
  readonly audit?: WriteAudit;
}

export interface DeleteCommand extends CommandBase {
  readonly type: 'delete';
  readonly ns: string;
  readonly key: string;
  /** Compare-and-delete on the key's modRevision (at least 1: an absent key cannot be deleted). */
  readonly prevRevision?: number;
  readonly audit?: WriteAudit;
}

/** Opens a session; its clientId is the raft index of this entry. Carries no session itself. */
export interface RegisterClientCommand {
  readonly type: 'registerClient';
  readonly stampMs: number;
}

/** Advances the clock (expiring idle sessions); with a session it is a keep-alive. */
export interface NoopCommand extends CommandBase {
  readonly type: 'noop';
}

/** A control-plane command (hardware, templates, workflows, tokens), applied by ControlState. */
export interface ControlPlaneCommand extends CommandBase {
  readonly type: 'control';
  readonly command: ControlCommand;
}

export type Command = PutCommand | DeleteCommand | RegisterClientCommand | NoopCommand | ControlPlaneCommand;
export type CommandType = Command['type'];

/** A stored value with the revisions that fence it. */
export interface VersionedValue {
  readonly value: Uint8Array;
  /** The store revision of the put that created the key (reset when it is deleted and re-created). */
  readonly createRevision: number;
  /** The store revision of the latest put; the compare target of prevRevision. */
  readonly modRevision: number;
  /** Puts since creation, starting at 1. */
  readonly version: number;
}

export type ErrorCode = 'E_CAS_FAILED' | 'E_SESSION_EXPIRED' | 'E_BAD_COMMAND' | 'E_NOT_FOUND';
export const errorCodes: readonly ErrorCode[] = [
  'E_CAS_FAILED',
  'E_SESSION_EXPIRED',
  'E_BAD_COMMAND',
  'E_NOT_FOUND',
];

export interface ErrorResult {
  readonly type: 'error';
  readonly code: ErrorCode;
  readonly message: string;
}

export interface PutResult {
  readonly type: 'put';
  /** The store revision this put created: the key's new modRevision. */
  readonly revision: number;
  readonly prev?: VersionedValue;
}

export interface DeleteResult {
  readonly type: 'delete';
  readonly revision: number;
  readonly prev: VersionedValue;
}

export interface RegisterClientResult {
  readonly type: 'registerClient';
  readonly clientId: number;
}

export interface NoopResult {
  readonly type: 'noop';
  /** The store revision at this point (unchanged by the noop). */
  readonly revision: number;
}

/** What a control command did; control-plane refusals are inside (`result.type === 'error'`). */
export interface ControlPlaneResult {
  readonly type: 'control';
  readonly result: ControlResult;
}

export type CommandResult =
  ErrorResult | PutResult | DeleteResult | RegisterClientResult | NoopResult | ControlPlaneResult;

// Tags are positions in these lists: append only.
const commandTypes: readonly CommandType[] = ['noop', 'registerClient', 'put', 'delete', 'control'];
const resultTypes: readonly CommandResult['type'][] = [
  'error',
  'noop',
  'registerClient',
  'put',
  'delete',
  'control',
];
const flagSession = 0b001;
const flagPrevRevision = 0b010;
const flagAudit = 0b100;
/** Tags are positions in this list: append only. */
const auditRoles: readonly Role[] = ['admin', 'operator', 'viewer'];

/** Thrown by the encoders for a command or result that breaks the rules; nothing is encoded. */
export class InvalidCommandError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidCommandError';
  }
}

export function errorResult(code: ErrorCode, message: string): ErrorResult {
  return { type: 'error', code, message: headUtf8(message, errorMessageBytesMax) };
}

/** A key or namespace for an error message: quoted, and shortened so messages stay small. */
export function quote(s: string): string {
  const shown = s.length > 64 ? `${s.slice(0, 64)}…` : s;
  return JSON.stringify(shown);
}

function isCount(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0;
}

function nameProblem(what: string, s: string, bytesMax: number): string | undefined {
  if (s.length === 0) return `${what} is empty`;
  if (!isWellFormed(s)) return `${what} contains an unpaired UTF-16 surrogate`;
  const bytes = utf8Length(s);
  if (bytes > bytesMax) return `${what} is ${bytes} bytes, over the limit of ${bytesMax}`;
  return undefined;
}

/** What is wrong with the parts every command shares: the stamp and the session tag. */
function envelopeProblem(command: Command): string | undefined {
  if (!isCount(command.stampMs)) return `stampMs must be a non-negative safe integer, got ${command.stampMs}`;
  if (command.type !== 'registerClient' && command.session !== undefined) {
    const { clientId, seq, ackedSeq } = command.session;
    if (!isCount(clientId) || clientId < 1)
      return `session clientId must be a positive integer, got ${clientId}`;
    if (!isCount(seq) || seq < 1) return `session seq must be a positive integer, got ${seq}`;
    if (!isCount(ackedSeq) || ackedSeq >= seq) {
      return `session ackedSeq must be an integer in [0, seq), got ${ackedSeq} with seq ${seq}`;
    }
  }
  return undefined;
}

/** What is wrong with a write's audit record: each text well-formed and bounded, a known role. */
function auditProblem(audit: WriteAudit): string | undefined {
  if (!auditRoles.includes(audit.role))
    return `audit role must be admin, operator or viewer, got ${audit.role}`;
  for (const [what, text] of [
    ['user', audit.user],
    ['address', audit.address],
    ['method', audit.method],
    ['kind', audit.kind],
  ] as const) {
    if (!isWellFormed(text)) return `audit ${what} contains an unpaired UTF-16 surrogate`;
    const bytes = utf8Length(text);
    if (bytes > auditTextBytesMax)
      return `audit ${what} is ${bytes} bytes, over the limit of ${auditTextBytesMax}`;
  }
  return undefined;
}

/** A control command's canonical JSON, or what is wrong with it. */
function controlPayload(command: ControlCommand): { json: string } | { problem: string } {
  let json: string;
  try {
    json = encodeControlCommand(command);
  } catch (e) {
    if (e instanceof ShapeError) return { problem: e.message };
    throw e;
  }
  const bytes = utf8Length(json);
  if (bytes > controlCommandBytesMax) {
    return { problem: `the command is ${bytes} bytes of JSON, over the limit of ${controlCommandBytesMax}` };
  }
  return { json };
}

/**
 * What is wrong with a command, or undefined when it is valid. Shared by the encoder (which
 * throws) and the decoder (which turns it into an E_BAD_COMMAND result), so both agree.
 */
export function commandProblem(command: Command): string | undefined {
  const problem = envelopeProblem(command);
  if (problem !== undefined) return problem;
  switch (command.type) {
    case 'noop':
    case 'registerClient':
      return undefined;
    case 'put':
    case 'delete': {
      const problem =
        nameProblem('ns', command.ns, namespaceBytesMax) ?? nameProblem('key', command.key, keyBytesMax);
      if (problem !== undefined) return problem;
      if (command.type === 'put' && command.value.length > valueBytesMax) {
        return `value is ${command.value.length} bytes, over the limit of ${valueBytesMax}`;
      }
      const prev = command.prevRevision;
      if (prev !== undefined && !isCount(prev)) {
        return `prevRevision must be a non-negative safe integer, got ${prev}`;
      }
      if (command.type === 'delete' && prev === 0) {
        return 'delete with prevRevision 0 ("must not exist") can never succeed; use at least 1';
      }
      return command.audit === undefined ? undefined : auditProblem(command.audit);
    }
    case 'control': {
      const payload = controlPayload(command.command);
      return 'problem' in payload ? payload.problem : undefined;
    }
    default:
      return unreachable(command);
  }
}

export function encodeCommand(command: Command): Uint8Array {
  // A control command's JSON is checked and built in one pass, then written below.
  const payload = command.type === 'control' ? controlPayload(command.command) : undefined;
  const problem =
    payload === undefined
      ? commandProblem(command)
      : (envelopeProblem(command) ?? ('problem' in payload ? payload.problem : undefined));
  if (problem !== undefined) throw new InvalidCommandError(`invalid ${command.type} command: ${problem}`);
  const json = payload !== undefined && 'json' in payload ? payload.json : undefined;
  const session = command.type === 'registerClient' ? undefined : command.session;
  const prevRevision = command.type === 'put' || command.type === 'delete' ? command.prevRevision : undefined;
  const audit = command.type === 'put' || command.type === 'delete' ? command.audit : undefined;
  // Sized exactly, so that finish() hands over the writer's array without copying it.
  let size = 3 + uvarintBytes(command.stampMs);
  if (session !== undefined) {
    size += uvarintBytes(session.clientId) + uvarintBytes(session.seq) + uvarintBytes(session.ackedSeq);
  }
  if (command.type === 'put' || command.type === 'delete') {
    size += stringBytes(command.ns) + stringBytes(command.key);
    if (command.type === 'put') size += uvarintBytes(command.value.length) + command.value.length;
    if (prevRevision !== undefined) size += uvarintBytes(prevRevision);
    if (audit !== undefined) size += auditBytes(audit);
  }
  if (json !== undefined) size += 1 + stringBytes(json);
  const w = new BinaryWriter(size);
  w.u8(commandCodecVersion).u8(commandTypes.indexOf(command.type)).uvarint(command.stampMs);
  w.u8(
    (session === undefined ? 0 : flagSession) |
      (prevRevision === undefined ? 0 : flagPrevRevision) |
      (audit === undefined ? 0 : flagAudit),
  );
  if (session !== undefined) w.uvarint(session.clientId).uvarint(session.seq).uvarint(session.ackedSeq);
  if (command.type === 'put' || command.type === 'delete') {
    w.string(command.ns).string(command.key);
    if (command.type === 'put') w.bytes(command.value);
    if (prevRevision !== undefined) w.uvarint(prevRevision);
    if (audit !== undefined) writeAudit(w, audit);
  }
  if (json !== undefined && command.type === 'control') {
    w.u8(controlCommandVersion(command.command)).string(json);
  }
  return w.finish();
}

/** Decodes and validates a command. Throws DecodeError naming the problem; never anything else on bad bytes. */
export function decodeCommand(bytes: Uint8Array): Command {
  const r = new BinaryReader(bytes);
  const version = r.u8('command version');
  if (version !== commandCodecVersion) {
    throw new DecodeError(
      `unsupported command codec version ${version} (this build reads ${commandCodecVersion})`,
    );
  }
  const typeTag = r.u8('command type');
  const type = commandTypes[typeTag];
  if (type === undefined) throw new DecodeError(`unknown command type ${typeTag}`);
  const stampMs = r.uvarint('stampMs');
  const flags = r.u8('command flags');
  if ((flags & ~(flagSession | flagPrevRevision | flagAudit)) !== 0)
    throw new DecodeError(`unknown command flags ${flags}`);
  const hasSession = (flags & flagSession) !== 0;
  const hasPrev = (flags & flagPrevRevision) !== 0;
  const hasAudit = (flags & flagAudit) !== 0;
  if (type === 'registerClient' && hasSession) throw new DecodeError('registerClient cannot carry a session');
  if ((type === 'noop' || type === 'registerClient' || type === 'control') && (hasPrev || hasAudit)) {
    throw new DecodeError(`${type} cannot carry a ${hasPrev ? 'prevRevision' : 'audit record'}`);
  }
  const session: SessionTag | undefined = hasSession
    ? {
        clientId: r.uvarint('session clientId'),
        seq: r.uvarint('session seq'),
        ackedSeq: r.uvarint('session ackedSeq'),
      }
    : undefined;
  // Built field by field rather than by spreading: this runs for every entry on every node.
  // Optional fields are absent, not undefined, as the encoder's input had them.
  let command: Command;
  switch (type) {
    case 'noop':
      command = session === undefined ? { type, stampMs } : { type, stampMs, session };
      break;
    case 'registerClient':
      command = { type, stampMs };
      break;
    case 'put': {
      const ns = r.string('ns', namespaceBytesMax);
      const key = r.string('key', keyBytesMax);
      const value = r.bytes('value', valueBytesMax);
      const put: Mutable<PutCommand> =
        session === undefined
          ? { type, stampMs, ns, key, value }
          : { type, stampMs, session, ns, key, value };
      if (hasPrev) put.prevRevision = r.uvarint('prevRevision');
      if (hasAudit) put.audit = readAudit(r);
      command = put;
      break;
    }
    case 'delete': {
      const ns = r.string('ns', namespaceBytesMax);
      const key = r.string('key', keyBytesMax);
      const del: Mutable<DeleteCommand> =
        session === undefined ? { type, stampMs, ns, key } : { type, stampMs, session, ns, key };
      if (hasPrev) del.prevRevision = r.uvarint('prevRevision');
      if (hasAudit) del.audit = readAudit(r);
      command = del;
      break;
    }
    case 'control': {
      const control = readControlPayload(r);
      command =
        session === undefined
          ? { type, stampMs, command: control }
          : { type, stampMs, session, command: control };
      break;
    }
    default:
      return unreachable(type);
  }
  r.end('command');
  // The control payload was checked while it was read; the rest is checked here.
  const problem = type === 'control' ? envelopeProblem(command) : commandProblem(command);
  if (problem !== undefined) throw new DecodeError(`invalid ${type} command: ${problem}`);
  return command;
}

/**
 * A control command's payload version is the state version it needs (versions.ts): a build that
 * cannot apply it stops (EntryTooNewError) rather than answer it with an error the others did not.
 */
function readControlPayload(r: BinaryReader): ControlCommand {
  const version = r.u8('control payload version');
  if (version > stateVersionOfThisBuild) {
    throw new EntryTooNewError(version, 'a control command');
  }
  if (version < controlPayloadVersion) {
    throw new DecodeError(`unsupported control payload version ${version}`);
  }
  const json = r.string('control command', controlCommandBytesMax);
  let command: ControlCommand;
  try {
    command = decodeControlCommand(json);
  } catch (e) {
    if (e instanceof ShapeError) throw new DecodeError(`invalid control command: ${e.message}`);
    throw e;
  }
  const needs = controlCommandVersion(command);
  if (needs !== version) {
    throw new DecodeError(`control command ${command.type} is written at version ${version}, not ${needs}`);
  }
  return command;
}

function auditBytes(a: WriteAudit): number {
  return stringBytes(a.user) + 1 + stringBytes(a.address) + stringBytes(a.method) + stringBytes(a.kind);
}

function writeAudit(w: BinaryWriter, a: WriteAudit): void {
  w.string(a.user).u8(auditRoles.indexOf(a.role)).string(a.address).string(a.method).string(a.kind);
}

function readAudit(r: BinaryReader): WriteAudit {
  const user = r.string('audit user', auditTextBytesMax);
  const roleTag = r.u8('audit role');
  const role = auditRoles[roleTag];
  if (role === undefined) throw new DecodeError(`unknown audit role ${roleTag}`);
  const address = r.string('audit address', auditTextBytesMax);
  const method = r.string('audit method', auditTextBytesMax);
  const kind = r.string('audit kind', auditTextBytesMax);
  return { user, role, address, method, kind };
}

function writePrev(w: BinaryWriter, prev: VersionedValue): void {
  w.bytes(prev.value).uvarint(prev.createRevision).uvarint(prev.modRevision).uvarint(prev.version);
}

function readPrev(r: BinaryReader): VersionedValue {
  const value = r.bytes('prev value', valueBytesMax);
  const createRevision = r.uvarint('prev createRevision');
  const modRevision = r.uvarint('prev modRevision');
  const version = r.uvarint('prev version');
  if (createRevision < 1 || modRevision < createRevision || version < 1) {
    throw new DecodeError(
      `prev revisions are inconsistent: create ${createRevision}, mod ${modRevision}, version ${version}`,
    );
  }
  return { value, createRevision, modRevision, version };
}

export function encodeResult(result: CommandResult): Uint8Array {
  // The variable parts first, so that the writer is sized exactly and finish() does not copy.
  const message = result.type === 'error' ? headUtf8(result.message, errorMessageBytesMax) : '';
  const json = result.type === 'control' ? encodeControlResult(result.result) : '';
  let size = 2;
  switch (result.type) {
    case 'error':
      size += stringBytes(result.code) + stringBytes(message);
      break;
    case 'noop':
      size += uvarintBytes(result.revision);
      break;
    case 'registerClient':
      size += uvarintBytes(result.clientId);
      break;
    case 'put':
      size += uvarintBytes(result.revision) + 1 + (result.prev === undefined ? 0 : prevBytes(result.prev));
      break;
    case 'delete':
      size += uvarintBytes(result.revision) + prevBytes(result.prev);
      break;
    case 'control':
      size += 1 + stringBytes(json);
      break;
    default:
      return unreachable(result);
  }
  const w = new BinaryWriter(size);
  w.u8(resultCodecVersion).u8(resultTypes.indexOf(result.type));
  switch (result.type) {
    case 'error':
      w.string(result.code).string(message);
      break;
    case 'noop':
      w.uvarint(result.revision);
      break;
    case 'registerClient':
      w.uvarint(result.clientId);
      break;
    case 'put':
      w.uvarint(result.revision).u8(result.prev === undefined ? 0 : 1);
      if (result.prev !== undefined) writePrev(w, result.prev);
      break;
    case 'delete':
      w.uvarint(result.revision);
      writePrev(w, result.prev);
      break;
    case 'control':
      w.u8(controlPayloadVersion).string(json);
      break;
    default:
      return unreachable(result);
  }
  return w.finish();
}

function prevBytes(prev: VersionedValue): number {
  return (
    uvarintBytes(prev.value.length) +
    prev.value.length +
    uvarintBytes(prev.createRevision) +
    uvarintBytes(prev.modRevision) +
    uvarintBytes(prev.version)
  );
}

/** Decodes a result (clients use this on what apply returned). Throws DecodeError on bad bytes. */
export function decodeResult(bytes: Uint8Array): CommandResult {
  if (bytes.length > resultBytesMax)
    throw new DecodeError(`result of ${bytes.length} bytes exceeds ${resultBytesMax}`);
  const r = new BinaryReader(bytes);
  const version = r.u8('result version');
  if (version !== resultCodecVersion) {
    throw new DecodeError(
      `unsupported result codec version ${version} (this build reads ${resultCodecVersion})`,
    );
  }
  const typeTag = r.u8('result type');
  const type = resultTypes[typeTag];
  if (type === undefined) throw new DecodeError(`unknown result type ${typeTag}`);
  let result: CommandResult;
  switch (type) {
    case 'error': {
      const code = r.string('error code', 64);
      const known = errorCodes.find((c) => c === code);
      if (known === undefined) throw new DecodeError(`unknown error code ${quote(code)}`);
      result = { type, code: known, message: r.string('error message', errorMessageBytesMax) };
      break;
    }
    case 'noop':
      result = { type, revision: r.uvarint('revision') };
      break;
    case 'registerClient':
      result = { type, clientId: r.uvarint('clientId') };
      break;
    case 'put': {
      const revision = r.uvarint('revision');
      const hasPrev = r.u8('put hasPrev');
      if (hasPrev > 1) throw new DecodeError(`put hasPrev must be 0 or 1, got ${hasPrev}`);
      result = hasPrev === 1 ? { type, revision, prev: readPrev(r) } : { type, revision };
      break;
    }
    case 'delete':
      result = { type, revision: r.uvarint('revision'), prev: readPrev(r) };
      break;
    case 'control':
      result = { type, result: readControlResult(r) };
      break;
    default:
      return unreachable(type);
  }
  r.end('result');
  return result;
}

function readControlResult(r: BinaryReader): ControlResult {
  const version = r.u8('control payload version');
  if (version < controlPayloadVersion || version > stateVersionOfThisBuild) {
    throw new DecodeError(
      `unsupported control payload version ${version} (this build reads ${controlPayloadVersion})`,
    );
  }
  const json = r.string('control result', controlResultBytesMax);
  try {
    return decodeControlResult(json);
  } catch (e) {
    if (e instanceof ShapeError) throw new DecodeError(`invalid control result: ${e.message}`);
    throw e;
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function unreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}
