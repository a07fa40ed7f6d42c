// Malformed protobuf messages for fuzz tests of the gRPC services. The schema comes from
// proto/*.proto through the small proto3 reader below, not from the generated codecs under test,
// so a codec bug cannot hide in its own inputs. Messages are written field by field on the wire,
// and each mutation breaks one named thing: a wire type, a length, a varint, a field number, a
// string's encoding or size, an integer's range, a nested message, a repeated field's count.
//
// Everything is a pure function of a Prng, so an input is reproduced from its seed and label;
// the label names the mutation and the field it hit, for reports.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Prng } from '../../src/platform/prng.js';

// ---- The schema: what proto/*.proto declares ---------------------------------------------------

const scalarTypes = [
  'double',
  'float',
  'int32',
  'int64',
  'uint32',
  'uint64',
  'sint32',
  'sint64',
  'fixed32',
  'fixed64',
  'sfixed32',
  'sfixed64',
  'bool',
  'string',
  'bytes',
] as const;
export type ScalarType = (typeof scalarTypes)[number];

export type FieldType =
  | { readonly kind: 'scalar'; readonly scalar: ScalarType }
  | { readonly kind: 'enum'; readonly name: string; readonly values: readonly number[] }
  | { readonly kind: 'message'; readonly name: string }
  | { readonly kind: 'map'; readonly key: ScalarType; readonly value: FieldType };

export interface FieldSchema {
  readonly name: string;
  readonly number: number;
  readonly type: FieldType;
  readonly repeated: boolean;
  /** The oneof the field belongs to, if any. */
  readonly oneof: string | undefined;
}

export interface MessageSchema {
  /** Full name, e.g. slipway.kv.v1.PutRequest. */
  readonly name: string;
  readonly fields: readonly FieldSchema[];
}

export interface MethodSchema {
  /** The gRPC path, e.g. /slipway.kv.v1.Kv/Put. */
  readonly path: string;
  readonly request: MessageSchema;
  readonly clientStreaming: boolean;
  readonly serverStreaming: boolean;
}

export interface ProtoSchema {
  readonly messages: ReadonlyMap<string, MessageSchema>;
  /** By gRPC path. */
  readonly methods: ReadonlyMap<string, MethodSchema>;
}

interface RawField {
  readonly name: string;
  readonly number: number;
  readonly typeName: string;
  readonly mapKey: string | undefined;
  readonly repeated: boolean;
  readonly oneof: string | undefined;
}

interface RawMessage {
  readonly name: string;
  readonly scope: string;
  readonly fields: RawField[];
}

interface RawMethod {
  readonly path: string;
  readonly request: string;
  readonly scope: string;
  readonly clientStreaming: boolean;
  readonly serverStreaming: boolean;
}

class Tokens {
  #at = 0;
  readonly #list: readonly string[];
  readonly #file: string;

  constructor(list: readonly string[], file: string) {
    this.#list = list;
    this.#file = file;
  }

  get done(): boolean {
    return this.#at >= this.#list.length;
  }

  peek(): string {
    return this.#list[this.#at] ?? '';
  }

  next(): string {
    const token = this.#list[this.#at];
    if (token === undefined) throw new Error(`${this.#file}: unexpected end`);
    this.#at += 1;
    return token;
  }

  expect(token: string): void {
    const got = this.next();
    if (got !== token) throw new Error(`${this.#file}: expected "${token}", got "${got}"`);
  }

  skipPast(token: string): void {
    while (this.next() !== token);
  }

  /** A `[...]` field option list, if one follows. */
  skipOptions(): void {
    if (this.peek() === '[') this.skipPast(']');
  }
}

function tokenize(text: string): string[] {
  const stripped = text.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
  return stripped.match(/"(?:[^"\\]|\\.)*"|[A-Za-z_][\w.]*|-?\d+|[{}()[\];=<>,]/g) ?? [];
}

/** Reads every .proto file in `dir`: the proto3 subset this project writes, and nothing more. */
export function readProtoSchema(dir: string): ProtoSchema {
  const messages: RawMessage[] = [];
  const enums = new Map<string, number[]>();
  const methods: RawMethod[] = [];
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.proto'))) {
    const t = new Tokens(tokenize(readFileSync(join(dir, file), 'utf8')), file);
    let pkg = '';
    const readEnum = (scope: string): void => {
      const name = `${scope}.${t.next()}`;
      const values: number[] = [];
      t.expect('{');
      while (t.peek() !== '}') {
        if (t.peek() === 'option' || t.peek() === 'reserved') {
          t.skipPast(';');
          continue;
        }
        t.next();
        t.expect('=');
        values.push(Number(t.next()));
        t.skipOptions();
        t.expect(';');
      }
      t.expect('}');
      enums.set(name, values);
    };
    const readField = (fields: RawField[], oneof: string | undefined): void => {
      let label = '';
      if (t.peek() === 'repeated' || t.peek() === 'optional') label = t.next();
      let typeName = t.next();
      let mapKey: string | undefined;
      if (typeName === 'map') {
        t.expect('<');
        mapKey = t.next();
        t.expect(',');
        typeName = t.next();
        t.expect('>');
      }
      const name = t.next();
      t.expect('=');
      const number = Number(t.next());
      t.skipOptions();
      t.expect(';');
      fields.push({ name, number, typeName, mapKey, repeated: label === 'repeated', oneof });
    };
    const readMessage = (scope: string): void => {
      const name = `${scope}.${t.next()}`;
      const fields: RawField[] = [];
      t.expect('{');
      while (t.peek() !== '}') {
        const word = t.peek();
        if (word === 'message') {
          t.next();
          readMessage(name);
        } else if (word === 'enum') {
          t.next();
          readEnum(name);
        } else if (word === 'option' || word === 'reserved') {
          t.skipPast(';');
        } else if (word === 'oneof') {
          t.next();
          const oneof = t.next();
          t.expect('{');
          while (t.peek() !== '}') readField(fields, oneof);
          t.expect('}');
        } else {
          readField(fields, undefined);
        }
      }
      t.expect('}');
      messages.push({ name, scope: name, fields });
    };
    while (!t.done) {
      const word = t.next();
      if (word === 'syntax') {
        t.expect('=');
        const syntax = t.next();
        if (syntax !== '"proto3"') throw new Error(`${file}: only proto3 is read, not ${syntax}`);
        t.expect(';');
      } else if (word === 'package') {
        pkg = t.next();
        t.expect(';');
      } else if (word === 'import' || word === 'option') {
        t.skipPast(';');
      } else if (word === 'message') {
        readMessage(pkg);
      } else if (word === 'enum') {
        readEnum(pkg);
      } else if (word === 'service') {
        const service = t.next();
        t.expect('{');
        while (t.peek() !== '}') {
          if (t.peek() === 'option') {
            t.skipPast(';');
            continue;
          }
          t.expect('rpc');
          const method = t.next();
          t.expect('(');
          const clientStreaming = t.peek() === 'stream';
          if (clientStreaming) t.next();
          const request = t.next();
          t.expect(')');
          t.expect('returns');
          t.expect('(');
          const serverStreaming = t.peek() === 'stream';
          if (serverStreaming) t.next();
          t.next();
          t.expect(')');
          if (t.peek() === '{') t.skipPast('}');
          else t.expect(';');
          methods.push({
            path: `/${pkg}.${service}/${method}`,
            request,
            scope: pkg,
            clientStreaming,
            serverStreaming,
          });
        }
        t.expect('}');
      } else {
        throw new Error(`${file}: unexpected "${word}" at the top level`);
      }
    }
  }
  const messageNames = new Set(messages.map((m) => m.name));
  /** Protobuf scoping: the innermost scope that declares the name wins. */
  const resolve = (typeName: string, scope: string): string => {
    if (typeName.startsWith('.')) return typeName.slice(1);
    const parts = scope.split('.');
    for (let n = parts.length; n >= 0; n--) {
      const candidate = [...parts.slice(0, n), typeName].join('.');
      if (messageNames.has(candidate) || enums.has(candidate)) return candidate;
    }
    throw new Error(`type ${typeName} (in ${scope}) is declared nowhere`);
  };
  const typeOf = (typeName: string, scope: string): FieldType => {
    const scalar = scalarTypes.find((s) => s === typeName);
    if (scalar !== undefined) return { kind: 'scalar', scalar };
    const name = resolve(typeName, scope);
    const values = enums.get(name);
    return values === undefined ? { kind: 'message', name } : { kind: 'enum', name, values };
  };
  const resolved = new Map<string, MessageSchema>();
  for (const m of messages) {
    const fields = m.fields.map((f): FieldSchema => {
      const value = typeOf(f.typeName, m.scope);
      if (f.mapKey === undefined) {
        return { name: f.name, number: f.number, type: value, repeated: f.repeated, oneof: f.oneof };
      }
      const key = typeOf(f.mapKey, m.scope);
      if (key.kind !== 'scalar') throw new Error(`${m.name}.${f.name}: a map key must be a scalar`);
      return {
        name: f.name,
        number: f.number,
        type: { kind: 'map', key: key.scalar, value },
        repeated: true,
        oneof: undefined,
      };
    });
    resolved.set(m.name, { name: m.name, fields });
  }
  const methodSchemas = new Map<string, MethodSchema>();
  for (const m of methods) {
    const request = resolved.get(resolve(m.request, m.scope));
    if (request === undefined) throw new Error(`${m.path}: its request ${m.request} is not a message`);
    methodSchemas.set(m.path, {
      path: m.path,
      request,
      clientStreaming: m.clientStreaming,
      serverStreaming: m.serverStreaming,
    });
  }
  return { messages: resolved, methods: methodSchemas };
}

// ---- The wire ------------------------------------------------------------------------------------

export const Wire = { varint: 0, i64: 1, len: 2, startGroup: 3, endGroup: 4, i32: 5 } as const;

/** One field as it goes on the wire. `body` is the encoded value; for LEN, the content alone. */
export interface WireField {
  readonly number: number;
  readonly wire: number;
  readonly body: Uint8Array;
}

function varint(value: bigint): Uint8Array {
  let v = BigInt.asUintN(64, value);
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    out.push(byte);
  } while (v !== 0n);
  return Uint8Array.from(out);
}

/** A tag for any field number and wire type, including ones protobuf forbids. */
function tag(number: number, wire: number): Uint8Array {
  return varint((BigInt(number) << 3n) | BigInt(wire));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

export function encodeFields(fields: readonly WireField[]): Uint8Array {
  return concat(
    fields.flatMap((f) =>
      f.wire === Wire.len
        ? [tag(f.number, f.wire), varint(BigInt(f.body.length)), f.body]
        : [tag(f.number, f.wire), f.body],
    ),
  );
}

const utf8 = (text: string): Uint8Array => Buffer.from(text, 'utf8');

function randomBytes(random: Prng, length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = random.int(256);
  return out;
}

function fixed(value: bigint, bytes: 4 | 8): Uint8Array {
  const out = Buffer.alloc(bytes);
  if (bytes === 4) out.writeUInt32LE(Number(BigInt.asUintN(32, value)));
  else out.writeBigUInt64LE(BigInt.asUintN(64, value));
  return out;
}

const zigzag = (value: bigint): bigint => (value >= 0n ? value * 2n : -value * 2n - 1n);

function wireOf(type: FieldType): number {
  if (type.kind !== 'scalar') return type.kind === 'enum' ? Wire.varint : Wire.len;
  switch (type.scalar) {
    case 'string':
    case 'bytes':
      return Wire.len;
    case 'double':
    case 'fixed64':
    case 'sfixed64':
      return Wire.i64;
    case 'float':
    case 'fixed32':
    case 'sfixed32':
      return Wire.i32;
    default:
      return Wire.varint;
  }
}

/** An integer of a scalar type as its wire body. */
function integerBody(scalar: ScalarType, value: bigint): Uint8Array {
  switch (scalar) {
    case 'sint32':
    case 'sint64':
      return varint(zigzag(value));
    case 'fixed32':
    case 'sfixed32':
    case 'float':
      return fixed(value, 4);
    case 'fixed64':
    case 'sfixed64':
    case 'double':
      return fixed(value, 8);
    default:
      return varint(value);
  }
}

// ---- Valid messages ------------------------------------------------------------------------------

export interface FuzzContext {
  readonly schema: ProtoSchema;
  /** What strings in valid messages are made of: names the node knows and names it does not. */
  readonly words: readonly string[];
  /** Likelier strings for fields of a given name (a role, a document), so requests get further. */
  readonly fieldWords?: Readonly<Record<string, readonly string[]>>;
}

/** A mutated (or random) message and what was done to it, e.g. "string:key:invalid-utf8". */
export interface Mutant {
  readonly bytes: Uint8Array;
  readonly mutation: string;
}

function messageSchema(ctx: FuzzContext, name: string): MessageSchema {
  const schema = ctx.schema.messages.get(name);
  if (schema === undefined) throw new Error(`no message ${name} in the schema`);
  return schema;
}

function validBody(random: Prng, ctx: FuzzContext, type: FieldType, depth: number, field = ''): Uint8Array {
  switch (type.kind) {
    case 'enum':
      return varint(BigInt(random.pick(type.values)));
    case 'message':
      return depth >= 3 ? new Uint8Array() : encodeFields(validFields(random, ctx, type.name, depth + 1));
    case 'map':
      return encodeFields([
        {
          number: 1,
          wire: wireOf({ kind: 'scalar', scalar: type.key }),
          body: validBody(random, ctx, { kind: 'scalar', scalar: type.key }, depth),
        },
        { number: 2, wire: wireOf(type.value), body: validBody(random, ctx, type.value, depth) },
      ]);
    case 'scalar':
      switch (type.scalar) {
        case 'string': {
          const likely = ctx.fieldWords?.[field];
          return utf8(random.pick(likely !== undefined && random.chance(0.7) ? likely : ctx.words));
        }
        case 'bytes':
          return randomBytes(random, random.int(17));
        case 'bool':
          return varint(BigInt(random.int(2)));
        default:
          return integerBody(
            type.scalar,
            BigInt(random.pick([0, 1, 2, 3, 7, 100, 1000, random.int(100_000)])),
          );
      }
  }
}

/** A valid encoding of message `name`: each field present or not, oneofs with one member at most. */
export function validFields(random: Prng, ctx: FuzzContext, name: string, depth = 0): WireField[] {
  const schema = messageSchema(ctx, name);
  const out: WireField[] = [];
  const oneofs = new Map<string, FieldSchema>();
  for (const f of schema.fields) {
    if (f.oneof === undefined || oneofs.has(f.oneof)) continue;
    const members = schema.fields.filter((m) => m.oneof === f.oneof);
    if (random.chance(0.9)) oneofs.set(f.oneof, random.pick(members));
  }
  for (const f of schema.fields) {
    if (f.oneof !== undefined ? oneofs.get(f.oneof) !== f : !random.chance(0.7)) continue;
    const count = f.repeated ? random.int(4) : 1;
    for (let i = 0; i < count; i++) {
      out.push({
        number: f.number,
        wire: wireOf(f.type),
        body: validBody(random, ctx, f.type, depth, f.name),
      });
    }
  }
  return out;
}

// ---- Mutations -----------------------------------------------------------------------------------

/** Lengths around the limits the state and the API keep (UTF-8 bytes), and far beyond them. */
const stringLengths = [
  127, 128, 129, 199, 200, 201, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 65_535, 65_536, 65_537,
  1_048_575, 1_048_577,
];

const invalidUtf8 = [
  [0xff],
  [0xfe, 0xff],
  [0x80],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xe2, 0x82],
  [0xf4, 0x90, 0x80, 0x80],
];

const yamlBomb = [
  'a: &a ["x","x","x","x","x","x","x","x","x"]',
  'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
  'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
  'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
  'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]',
  'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]',
  'g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]',
].join('\n');

/** Strings that break a parser, a limit or an encoding; each labelled. */
function strangeString(random: Prng, ctx: FuzzContext): { label: string; bytes: Uint8Array } {
  const word = random.pick(ctx.words);
  switch (random.int(12)) {
    case 0:
      return { label: 'nul', bytes: utf8(random.pick([`${word}\0`, '\0', `\0${word}`, 'a\0b'])) };
    case 1: {
      const bad = Uint8Array.from(random.pick(invalidUtf8));
      return { label: 'invalid-utf8', bytes: concat([utf8(word), bad, utf8(word)]) };
    }
    case 2:
    case 3: {
      const n = random.pick(stringLengths);
      return { label: `long-${n}`, bytes: utf8(random.pick(['x', 'a', '9', '-']).repeat(n)) };
    }
    case 4: {
      // Characters under a limit, bytes over it.
      const n = random.pick([65, 101, 129, 513, 2049]);
      return { label: `multibyte-${n}`, bytes: utf8(random.pick(['é', '✓', '😀']).repeat(n)) };
    }
    case 5:
      return {
        label: 'control',
        bytes: utf8(random.pick(['\r\n', '\t', '\u001b[31m', '\u202e', '\ufeff', ' ', '\u00a0', '\u2028'])),
      };
    case 6: {
      const depth = random.pick([1_000, 20_000]);
      return {
        label: `json-deep-${depth}`,
        bytes: utf8(random.chance(0.5) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : '{"a":'.repeat(depth)),
      };
    }
    case 7:
      return { label: 'yaml-aliases', bytes: utf8(yamlBomb) };
    case 8:
      return {
        label: 'template',
        bytes: utf8(
          random.pick([
            '{{#each this}}{{this}}{{/each}}',
            '{{constructor.constructor "return process"}}',
            '{{> partial}}',
            '{{{{raw}}}}',
            '{{',
            'version: "0.1"\nname: {{ hardware.id }}\ntasks: []\n',
          ]),
        ),
      };
    case 9:
      return {
        label: 'path',
        bytes: utf8(
          random.pick(['../../etc/passwd', '/', '.', '..', 'a/../../b', '%2e%2e%2f', '\\\\host\\share']),
        ),
      };
    case 10:
      return {
        label: 'number-like',
        bytes: utf8(random.pick(['-1', '1e309', 'NaN', '0x10', '9007199254740993', '-0', 'Infinity'])),
      };
    default:
      return {
        label: 'padded',
        bytes: utf8(random.pick([` ${word}`, `${word} `, word.toUpperCase(), `${word}\n`])),
      };
  }
}

const strangeIntegers: readonly bigint[] = [
  -1n,
  -(2n ** 31n),
  2n ** 31n - 1n,
  2n ** 31n,
  2n ** 32n - 1n,
  2n ** 32n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 53n + 1n,
  2n ** 63n - 1n,
  2n ** 63n,
  2n ** 64n - 1n,
];

/** The message's declared fields that match `pred`. */
function fieldsWhere(schema: MessageSchema, pred: (f: FieldSchema) => boolean): FieldSchema[] {
  return schema.fields.filter(pred);
}

const isString = (f: FieldSchema): boolean =>
  f.type.kind === 'scalar' && (f.type.scalar === 'string' || f.type.scalar === 'bytes');
const isInteger = (f: FieldSchema): boolean =>
  f.type.kind === 'enum' ||
  (f.type.kind === 'scalar' && f.type.scalar !== 'string' && f.type.scalar !== 'bytes');
const isNested = (f: FieldSchema): boolean => f.type.kind === 'message' || f.type.kind === 'map';

/** Replaces every occurrence of field `number` with `replacement` (at the end: last one wins). */
function replaced(
  fields: readonly WireField[],
  number: number,
  replacement: readonly WireField[],
): WireField[] {
  return [...fields.filter((f) => f.number !== number), ...replacement];
}

/** A field number the message does not declare: just past its own, far away, or at the edge. */
function unknownNumber(random: Prng, schema: MessageSchema): number {
  const used = new Set(schema.fields.map((f) => f.number));
  const max = Math.max(0, ...used);
  for (;;) {
    const n = random.pick([max + 1, max + 2, 15, 16, 100, 2047, 2048, 19_000, 19_999, 2 ** 29 - 1]);
    if (!used.has(n)) return n;
  }
}

function anyBody(random: Prng, wire: number): Uint8Array {
  switch (wire) {
    case Wire.varint:
      return varint(random.pick(strangeIntegers));
    case Wire.i64:
      return randomBytes(random, 8);
    case Wire.i32:
      return randomBytes(random, 4);
    case Wire.len:
      return randomBytes(random, random.int(12));
    default:
      return new Uint8Array();
  }
}

type Mutation = (
  random: Prng,
  ctx: FuzzContext,
  schema: MessageSchema,
  fields: WireField[],
) => Mutant | undefined;

const mutations: readonly (readonly [string, Mutation])[] = [
  [
    'truncate',
    (random, _ctx, _schema, fields) => {
      const bytes = encodeFields(fields);
      if (bytes.length < 2) return undefined;
      return { bytes: bytes.slice(0, random.range(1, bytes.length - 1)), mutation: 'truncate' };
    },
  ],
  [
    'wire-type',
    (random, _ctx, schema, fields) => {
      if (schema.fields.length === 0) return undefined;
      const f = random.pick(schema.fields);
      const natural = wireOf(f.type);
      const wire = random.pick(
        [Wire.varint, Wire.i64, Wire.len, Wire.i32, Wire.startGroup].filter((w) => w !== natural),
      );
      const body = wire === Wire.startGroup ? tag(f.number, Wire.endGroup) : anyBody(random, wire);
      return {
        bytes: encodeFields(replaced(fields, f.number, [{ number: f.number, wire, body }])),
        mutation: `wire-type:${f.name}:${wire}`,
      };
    },
  ],
  [
    'truncated-varint',
    (random, _ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, (f) => wireOf(f.type) === Wire.varint);
      const f = candidates.length === 0 ? undefined : random.pick(candidates);
      const tail =
        f === undefined
          ? [0x80]
          : [...tag(f.number, Wire.varint), ...Array<number>(random.range(1, 9)).fill(0xff)];
      return {
        bytes: concat([encodeFields(fields), Uint8Array.from(tail)]),
        mutation: `truncated-varint:${f?.name ?? 'tag'}`,
      };
    },
  ],
  [
    'truncated-length',
    (random, _ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, (f) => wireOf(f.type) === Wire.len);
      if (candidates.length === 0) return undefined;
      const f = random.pick(candidates);
      const claimed = random.range(1, 64);
      const sent = randomBytes(random, random.int(claimed));
      return {
        bytes: concat([encodeFields(fields), tag(f.number, Wire.len), varint(BigInt(claimed)), sent]),
        mutation: `truncated-length:${f.name}`,
      };
    },
  ],
  [
    'huge-length',
    (random, _ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, (f) => wireOf(f.type) === Wire.len);
      const number = candidates.length === 0 ? unknownNumber(random, schema) : random.pick(candidates).number;
      const length = random.pick([2n ** 31n - 1n, 2n ** 32n - 1n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n]);
      return {
        bytes: concat([encodeFields(fields), tag(number, Wire.len), varint(length), randomBytes(random, 8)]),
        mutation: `huge-length:${number}:${length}`,
      };
    },
  ],
  [
    'unknown-fields',
    (random, _ctx, schema, fields) => {
      const extra: WireField[] = [];
      for (let i = random.range(1, 6); i > 0; i--) {
        const wire = random.pick([Wire.varint, Wire.i64, Wire.len, Wire.i32]);
        extra.push({ number: unknownNumber(random, schema), wire, body: anyBody(random, wire) });
      }
      if (random.chance(0.3)) {
        const n = unknownNumber(random, schema);
        extra.push({
          number: n,
          wire: Wire.startGroup,
          body: concat([encodeFields(extra.slice(0, 1)), tag(n, Wire.endGroup)]),
        });
      }
      const all = [...fields];
      for (const f of extra) all.splice(random.int(all.length + 1), 0, f);
      return { bytes: encodeFields(all), mutation: 'unknown-fields' };
    },
  ],
  [
    'bad-tag',
    (random, _ctx, _schema, fields) => {
      const variant = random.int(4);
      const bad =
        variant === 0
          ? tag(0, random.pick([Wire.varint, Wire.len]))
          : variant === 1
            ? tag(random.pick([2 ** 29, 2 ** 31, 2 ** 32 - 1]), Wire.varint)
            : variant === 2
              ? tag(random.range(1, 5), random.pick([6, 7]))
              : tag(random.range(1, 5), Wire.endGroup);
      const all = encodeFields(fields);
      const at = random.int(fields.length + 1);
      const before = encodeFields(fields.slice(0, at));
      return {
        bytes: concat([before, bad, Uint8Array.of(1, 1), all.slice(before.length)]),
        mutation: `bad-tag:${['field-0', 'number-too-big', 'wire-type-6-7', 'end-group'][variant]}`,
      };
    },
  ],
  [
    'overlong-varint',
    (random, _ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, (f) => wireOf(f.type) === Wire.varint);
      const number = candidates.length === 0 ? unknownNumber(random, schema) : random.pick(candidates).number;
      const body = Uint8Array.from([...Array<number>(random.range(10, 12)).fill(0xff), 0x01]);
      return {
        bytes: encodeFields([...fields, { number, wire: Wire.varint, body }]),
        mutation: `overlong-varint:${number}`,
      };
    },
  ],
  [
    'string',
    (random, ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, isString);
      if (candidates.length === 0) return undefined;
      const f = random.pick(candidates);
      const s = strangeString(random, ctx);
      return {
        bytes: encodeFields(
          replaced(fields, f.number, [{ number: f.number, wire: Wire.len, body: s.bytes }]),
        ),
        mutation: `string:${f.name}:${s.label}`,
      };
    },
  ],
  [
    'integer',
    (random, _ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, isInteger);
      if (candidates.length === 0) return undefined;
      const f = random.pick(candidates);
      const value = random.pick(strangeIntegers);
      const scalar = f.type.kind === 'scalar' ? f.type.scalar : 'int32';
      const body = integerBody(scalar, value);
      return {
        bytes: encodeFields(replaced(fields, f.number, [{ number: f.number, wire: wireOf(f.type), body }])),
        mutation: `integer:${f.name}:${value}`,
      };
    },
  ],
  [
    'nested',
    (random, ctx, schema, fields) => {
      const candidates = fieldsWhere(schema, isNested);
      if (candidates.length === 0) return undefined;
      const f = random.pick(candidates);
      const variant = random.int(3);
      let body: Uint8Array;
      let what: string;
      if (variant === 0 || f.type.kind !== 'message') {
        body = randomBytes(random, random.range(1, 24));
        what = 'random';
      } else if (variant === 1) {
        const inner = mutateMessage(random, ctx, f.type.name);
        body = inner.bytes;
        what = inner.mutation;
      } else {
        const inner = encodeFields(validFields(random, ctx, f.type.name));
        body = inner.slice(0, Math.max(0, inner.length - random.range(1, 3)));
        what = 'cut';
      }
      return {
        bytes: encodeFields(replaced(fields, f.number, [{ number: f.number, wire: Wire.len, body }])),
        mutation: `nested:${f.name}:${what}`,
      };
    },
  ],
  [
    'thousands',
    (random, ctx, schema, fields) => {
      if (schema.fields.length === 0) return undefined;
      const repeated = fieldsWhere(schema, (f) => f.repeated);
      const f =
        repeated.length > 0 && random.chance(0.8) ? random.pick(repeated) : random.pick(schema.fields);
      const count = random.range(1_000, 5_000);
      const one = validBody(random, ctx, f.type, 2);
      const many: WireField[] = Array.from({ length: count }, () => ({
        number: f.number,
        wire: wireOf(f.type),
        body: one,
      }));
      return { bytes: encodeFields([...fields, ...many]), mutation: `thousands:${f.name}:${count}` };
    },
  ],
  [
    'nested-groups',
    (random, _ctx, schema, fields) => {
      const n = unknownNumber(random, schema);
      const depth = random.pick([100, 1_000, 10_000, 100_000]);
      const open = tag(n, Wire.startGroup);
      const close = tag(n, Wire.endGroup);
      const balanced = random.chance(0.5);
      const parts: Uint8Array[] = [encodeFields(fields)];
      for (let i = 0; i < depth; i++) parts.push(open);
      if (balanced) for (let i = 0; i < depth; i++) parts.push(close);
      return { bytes: concat(parts), mutation: `nested-groups:${depth}:${balanced ? 'balanced' : 'open'}` };
    },
  ],
  [
    'oneof-all',
    (random, ctx, schema, fields) => {
      const members = fieldsWhere(schema, (f) => f.oneof !== undefined);
      if (members.length === 0) return undefined;
      const all = random
        .shuffled(members)
        .map((f) => ({ number: f.number, wire: wireOf(f.type), body: validBody(random, ctx, f.type, 1) }));
      return { bytes: encodeFields([...fields, ...all]), mutation: 'oneof-all' };
    },
  ],
  [
    'flip',
    (random, _ctx, _schema, fields) => {
      const bytes = Uint8Array.from(encodeFields(fields));
      if (bytes.length === 0) return undefined;
      for (let i = random.range(1, 4); i > 0; i--)
        bytes[random.int(bytes.length)] = random.pick([0, 0xff, 0x80, random.int(256)]);
      return { bytes, mutation: 'flip' };
    },
  ],
];

/** A valid encoding of message `name` with one named thing broken. */
export function mutateMessage(random: Prng, ctx: FuzzContext, name: string): Mutant {
  const schema = messageSchema(ctx, name);
  const fields = validFields(random, ctx, name);
  for (;;) {
    const [, mutate] = random.pick(mutations);
    const mutant = mutate(random, ctx, schema, fields);
    if (mutant !== undefined) return mutant;
  }
}

/** Any bytes at all, of a length a parser cares about. */
export function randomMessage(random: Prng): Mutant {
  const length = random.pick([0, 1, 2, 3, 5, 8, 16, random.range(1, 64), 300, 4096]);
  return { bytes: randomBytes(random, length), mutation: `random-bytes:${length}` };
}

/** A valid encoding of message `name`, unmutated. */
export function validMessage(random: Prng, ctx: FuzzContext, name: string): Mutant {
  return { bytes: encodeFields(validFields(random, ctx, name)), mutation: 'valid' };
}

/** A message whose encoding is more than `limit` bytes: a valid one with an unknown field that fills it out. */
export function oversizedMessage(random: Prng, ctx: FuzzContext, name: string, limit: number): Mutant {
  const schema = messageSchema(ctx, name);
  const head = encodeFields(validFields(random, ctx, name));
  const n = unknownNumber(random, schema);
  const want = limit + 1 + random.int(64) - head.length;
  // The filler's tag and length come on top, so the whole is over the limit either way.
  const filler = new Uint8Array(Math.max(0, want)).fill(0x78);
  const bytes = concat([head, encodeFields([{ number: n, wire: Wire.len, body: filler }])]);
  return { bytes, mutation: `oversized:${bytes.length}` };
}
