// Readers that check the shape of a parsed JSON value and rebuild it in canonical form: only
// known fields, in the order the schema lists them, map keys sorted. Control commands travel
// and snapshots persist as JSON, so one reader per record type does three jobs: it refuses
// malformed input with a message naming the field, it gives the typed value, and it makes the
// encoding unique (equal values give equal JSON text, which keeps snapshots byte-comparable).
//
// Readers check types only. Domain rules (a MAC's format, a timeout's range) belong to apply,
// which answers them with E_INVALID; a reader's refusal means the bytes were never a command.
import { isWellFormed, utf8Length } from '../../platform/utf8-text.js';
import type { JsonValue } from '../../model/records.js';

/** A value that does not have the required shape. The message starts with the field's path. */
export class ShapeError extends Error {
  constructor(path: string, problem: string) {
    super(path === '' ? problem : `${path}: ${problem}`);
    this.name = 'ShapeError';
  }
}

export type Reader<T> = (value: unknown, path: string) => T;

/** A field that may be absent (JSON has no undefined, so absent and undefined are the same). */
export interface OptionalField<T> {
  readonly optional: Reader<T>;
}

export function optional<T>(read: Reader<T>): OptionalField<T> {
  return { optional: read };
}

type Field = Reader<unknown> | OptionalField<unknown>;
export type Schema = Readonly<Record<string, Field>>;

type RequiredKeys<S> = { [K in keyof S]: S[K] extends OptionalField<unknown> ? never : K }[keyof S];
type OptionalKeys<S> = { [K in keyof S]: S[K] extends OptionalField<unknown> ? K : never }[keyof S];
type Simplify<T> = { [K in keyof T]: T[K] } & {};
export type Shape<S extends Schema> = Simplify<
  { readonly [K in RequiredKeys<S>]: S[K] extends Reader<infer T> ? T : never } & {
    readonly [K in OptionalKeys<S>]?: S[K] extends OptionalField<infer T> ? T : never;
  }
>;

export function at(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path === '' ? key : `${path}.${key}`;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return 'a string';
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value);
    case 'undefined':
      return 'nothing';
    default:
      return `${typeof value === 'object' ? 'an' : 'a'} ${typeof value}`;
  }
}

function isPlainObject(value: unknown): value is Readonly<Record<string, unknown>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A record with exactly the schema's fields; the output lists them in schema order. */
export function object<S extends Schema>(schema: S): Reader<Shape<S>> {
  const keys = Object.keys(schema);
  return (value, path) => {
    if (!isPlainObject(value)) throw new ShapeError(path, `must be an object, got ${describe(value)}`);
    for (const key of Object.keys(value)) {
      if (!Object.hasOwn(schema, key)) throw new ShapeError(path, `unknown field ${JSON.stringify(key)}`);
    }
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const field = schema[key];
      const present = Object.hasOwn(value, key) && value[key] !== undefined;
      if (typeof field === 'function') {
        if (!present) throw new ShapeError(at(path, key), 'is required');
        out[key] = field(value[key], at(path, key));
      } else if (field !== undefined && present) {
        out[key] = field.optional(value[key], at(path, key));
      }
    }
    // The one unchecked step: `out` has exactly the schema's keys, each read by its reader.
    return out as Shape<S>;
  };
}

/** A record chosen by its `type` field. */
export function variant<T extends { readonly type: string }>(readers: {
  readonly [K in T['type']]: Reader<Extract<T, { readonly type: K }>>;
}): Reader<T> {
  return (value, path) => {
    const type = isPlainObject(value) ? value['type'] : undefined;
    if (typeof type !== 'string' || !Object.hasOwn(readers, type)) {
      const known = Object.keys(readers).join(', ');
      throw new ShapeError(
        at(path, 'type'),
        `must be one of ${known}, got ${JSON.stringify(type) ?? 'nothing'}`,
      );
    }
    const read = (readers as Readonly<Record<string, Reader<T>>>)[type];
    if (read === undefined) throw new ShapeError(at(path, 'type'), `unknown type ${type}`);
    return read(value, path);
  };
}

export function string(bytesMax: number): Reader<string> {
  return (value, path) => {
    if (typeof value !== 'string') throw new ShapeError(path, `must be a string, got ${describe(value)}`);
    if (!isWellFormed(value)) throw new ShapeError(path, 'contains an unpaired UTF-16 surrogate');
    // A UTF-16 unit is at most 3 UTF-8 bytes, so most strings skip the count.
    if (value.length * 3 > bytesMax && utf8Length(value) > bytesMax) {
      throw new ShapeError(path, `is over the limit of ${bytesMax} bytes`);
    }
    return value;
  };
}

export function literal<const V extends string>(values: readonly V[]): Reader<V> {
  return (value, path) => {
    const found = values.find((v) => v === value);
    if (found === undefined) {
      throw new ShapeError(
        path,
        `must be one of ${values.join(', ')}, got ${JSON.stringify(value) ?? 'nothing'}`,
      );
    }
    return found;
  };
}

/** An integer in [min, max]; -0 becomes 0 so that it has one encoding. */
export function integer(min: number, max: number): Reader<number> {
  return (value, path) => {
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      throw new ShapeError(path, `must be an integer, got ${describe(value)}`);
    }
    if (value < min || value > max) throw new ShapeError(path, `must be in [${min}, ${max}], got ${value}`);
    return value + 0;
  };
}

/** Any safe integer: ranges are domain rules, checked by apply. */
export const safeInteger = integer(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
export const count = integer(0, Number.MAX_SAFE_INTEGER);

export const boolean: Reader<boolean> = (value, path) => {
  if (typeof value !== 'boolean') throw new ShapeError(path, `must be true or false, got ${describe(value)}`);
  return value;
};

export function array<T>(item: Reader<T>, lengthMax: number): Reader<readonly T[]> {
  return (value, path) => {
    if (!Array.isArray(value)) throw new ShapeError(path, `must be an array, got ${describe(value)}`);
    if (value.length > lengthMax)
      throw new ShapeError(path, `has ${value.length} items, over the limit of ${lengthMax}`);
    return value.map((v: unknown, i) => item(v, at(path, i)));
  };
}

/** A map from names to values, with its keys sorted (Object.fromEntries: `__proto__` stays data). */
export function map<T>(item: Reader<T>, keyBytesMax: number): Reader<{ readonly [k: string]: T }> {
  const key = string(keyBytesMax);
  return (value, path) => {
    if (!isPlainObject(value)) throw new ShapeError(path, `must be an object, got ${describe(value)}`);
    const names = Object.keys(value).sort(compareStrings);
    return Object.fromEntries(names.map((name) => [key(name, path), item(value[name], at(path, name))]));
  };
}

/** Arbitrary JSON (operator metadata), nested at most `depthMax` deep, object keys sorted. */
export function json(depthMax: number, stringBytesMax: number): Reader<JsonValue> {
  const text = string(stringBytesMax);
  const read = (value: unknown, path: string, depth: number): JsonValue => {
    if (value === null || typeof value === 'boolean') return value;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new ShapeError(path, 'must be a finite number');
      return value + 0;
    }
    if (typeof value === 'string') return text(value, path);
    if (depth >= depthMax) throw new ShapeError(path, `is nested deeper than ${depthMax} levels`);
    if (Array.isArray(value)) return value.map((v: unknown, i) => read(v, at(path, i), depth + 1));
    if (!isPlainObject(value)) throw new ShapeError(path, `is not JSON (${describe(value)})`);
    const names = Object.keys(value).sort(compareStrings);
    return Object.fromEntries(
      names.map((name) => [text(name, path), read(value[name], at(path, name), depth + 1)]),
    );
  };
  return (value, path) => read(value, path, 0);
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
