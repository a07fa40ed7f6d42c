// Envoy's own protobuf definitions (the data-plane-api shipped in @grpc/grpc-js-xds/deps), for
// checking what Slipway sends an xDS client and the Envoy bootstrap it renders, since no Envoy
// binary can run here. Checks, each problem named by its path:
//  - every field on the wire (or key in JSON) is one Envoy's message declares: none unknown;
//  - every google.protobuf.Any names a type Envoy has, and its bytes are checked as that type;
//  - the protoc-gen-validate rules cheap to check: required messages and oneofs, string and
//    repeated minimum lengths, numeric bounds, defined enum values.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const deps = fileURLToPath(new URL('../../node_modules/@grpc/grpc-js-xds/deps/', import.meta.url));
const includeDirs = [
  ...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => join(deps, d)),
  fileURLToPath(new URL('../../node_modules/protobufjs/', import.meta.url)),
];

/** The files whose messages Slipway sends (their imports come along). */
const files = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/bootstrap/v3/bootstrap.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
  'envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto',
  'envoy/extensions/transport_sockets/tls/v3/tls.proto',
];

let root: protobuf.Root | undefined;

export function envoyRoot(): protobuf.Root {
  if (root !== undefined) return root;
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) => includeDirs.map((d) => join(d, target)).find(existsSync) ?? target;
  r.loadSync(files, { keepCase: true });
  r.resolveAll();
  root = r;
  return r;
}

/** Envoy's message type named by a type URL or a full name. */
export function envoyType(name: string): protobuf.Type {
  return envoyRoot().lookupType(name.replace(/^type\.googleapis\.com\//, ''));
}

const anyName = 'google.protobuf.Any';

function wireType(field: protobuf.Field): protobuf.Type | undefined {
  return field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
}

/** Problems with `bytes` as an encoded `type`: unknown fields, Any type URLs, validate rules. */
export function checkEnvoyBytes(type: protobuf.Type, bytes: Uint8Array, path = type.name): string[] {
  const problems: string[] = [];
  walkWire(type, bytes, path, problems);
  if (problems.length === 0)
    checkRules(type, type.toObject(type.decode(bytes), { bytes: Array }), path, problems, true);
  return problems;
}

function walkWire(type: protobuf.Type, bytes: Uint8Array, path: string, problems: string[]): void {
  if (type.fullName === `.${anyName}`) {
    const any = type.decode(bytes) as unknown as { type_url: string; value: Uint8Array };
    let inner: protobuf.Type;
    try {
      inner = envoyType(any.type_url);
    } catch {
      problems.push(`${path}: Any type URL "${any.type_url}" names no Envoy message`);
      return;
    }
    walkWire(inner, any.value, `${path}<${inner.name}>`, problems);
    return;
  }
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const id = tag >>> 3;
    const field = type.fieldsById[id];
    if (field === undefined) {
      problems.push(`${path}: field number ${id} is not a field of ${type.fullName}`);
      reader.skipType(tag & 7);
      continue;
    }
    const at = `${path}.${field.name}`;
    if ((tag & 7) !== 2) {
      reader.skipType(tag & 7);
      continue;
    }
    const start = reader.pos;
    const length = reader.uint32();
    const body = bytes.subarray(reader.pos, reader.pos + length);
    reader.pos = start;
    reader.skipType(2);
    if (field instanceof protobuf.MapField) {
      // An entry: key = 1, value = 2.
      const valueType = wireType(field);
      if (valueType === undefined) continue;
      const entry = protobuf.Reader.create(body);
      while (entry.pos < entry.len) {
        const t = entry.uint32();
        if (t >>> 3 === 2 && (t & 7) === 2) walkWire(valueType, entry.bytes(), `${at}[]`, problems);
        else entry.skipType(t & 7);
      }
      continue;
    }
    const nested = wireType(field);
    if (nested !== undefined) walkWire(nested, body, at, problems);
  }
}

type Plain = Record<string, unknown>;

function present(v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (Array.isArray(v)) return v.length > 0;
  return true;
}

/** The validate rules of `field` that matter here, checked against `value` (when present). */
function checkFieldRules(field: protobuf.Field, given: unknown, at: string, problems: string[]): void {
  // An absent proto3 string is "" (and so breaks a min_len rule); in a oneof, absent means unset.
  const value =
    given === undefined && field.type === 'string' && !field.repeated && field.partOf === null ? '' : given;
  const o = (field.options ?? {}) as Record<string, unknown>;
  const rule = (name: string): unknown => o[`(validate.rules).${name}`];
  // In a oneof, a rule applies only to the member that is set.
  if (rule('message.required') === true && field.partOf === null && !present(value))
    problems.push(`${at}: required`);
  if (!present(value)) return;
  const text = typeof value === 'string' ? value : undefined;
  for (const key of ['string.min_len', 'string.min_bytes']) {
    const min = rule(key);
    if (typeof min === 'number' && text !== undefined && text.length < min)
      problems.push(`${at}: shorter than ${min}`);
  }
  const items = rule('repeated.min_items');
  if (typeof items === 'number' && Array.isArray(value) && value.length < items) {
    problems.push(`${at}: fewer than ${items} items`);
  }
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+$/.test(value)
        ? Number(value)
        : undefined;
  if (n !== undefined) {
    for (const kind of ['uint32', 'uint64', 'int32', 'int64', 'double']) {
      const gt = rule(`${kind}.gt`);
      const gte = rule(`${kind}.gte`);
      const lt = rule(`${kind}.lt`);
      const lte = rule(`${kind}.lte`);
      if (typeof gt === 'number' && !(n > gt)) problems.push(`${at}: ${n} is not > ${gt}`);
      if (typeof gte === 'number' && !(n >= gte)) problems.push(`${at}: ${n} is not >= ${gte}`);
      if (typeof lt === 'number' && !(n < lt)) problems.push(`${at}: ${n} is not < ${lt}`);
      if (typeof lte === 'number' && !(n <= lte)) problems.push(`${at}: ${n} is not <= ${lte}`);
    }
  }
  if (rule('enum.defined_only') === true && field.resolvedType instanceof protobuf.Enum) {
    const known = Object.keys(field.resolvedType.values).concat(
      Object.values(field.resolvedType.values).map(String),
    );
    if (!known.includes(String(value)))
      problems.push(`${at}: ${String(value)} is not a value of ${field.resolvedType.name}`);
  }
}

/**
 * Validate rules over a plain object of `type` (decoded bytes, or bootstrap JSON with `json`
 * false: keys are proto field names, Any is `{"@type", ...fields}`, wrappers are bare values).
 */
function checkRules(
  type: protobuf.Type,
  obj: Plain,
  path: string,
  problems: string[],
  decoded: boolean,
): void {
  for (const oneof of type.oneofsArray) {
    const required = (oneof.options ?? {})['(validate.required)'] === true;
    if (required && !oneof.oneof.some((name) => present(obj[name])))
      problems.push(`${path}: one of ${oneof.oneof.join(', ')} is required`);
  }
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    const at = `${path}.${field.name}`;
    const nested = wireType(field);
    const bare =
      nested !== undefined &&
      /^\.google\.protobuf\.(U?Int(32|64)|Double|Float|Bool|String|Bytes)Value$/.test(nested.fullName);
    checkFieldRules(
      field,
      bare && !decoded ? value : bare && present(value) ? (value as Plain)['value'] : value,
      at,
      problems,
    );
    if (nested === undefined || !present(value) || bare) continue;
    const values: unknown[] =
      field instanceof protobuf.MapField
        ? Object.values(value as Plain)
        : Array.isArray(value)
          ? value
          : [value];
    for (const v of values) checkNested(nested, v as Plain, at, problems, decoded);
  }
}

function checkNested(type: protobuf.Type, v: Plain, at: string, problems: string[], decoded: boolean): void {
  if (type.fullName !== `.${anyName}`) {
    checkRules(type, v, at, problems, decoded);
    return;
  }
  if (decoded) {
    const inner = envoyType(String(v['type_url']));
    // An Any of an empty message (Router {}) has no value on the wire.
    const value = Uint8Array.from((v['value'] as number[] | undefined) ?? []);
    checkRules(
      inner,
      inner.toObject(inner.decode(value), { bytes: Array }),
      `${at}<${inner.name}>`,
      problems,
      true,
    );
  } else {
    const inner = envoyType(String(v['@type']));
    checkRules(inner, v, `${at}<${inner.name}>`, problems, false);
  }
}

/** Problems with `json` as Envoy's proto3 JSON for `type` (field names as in the .proto). */
export function checkEnvoyJson(type: protobuf.Type, json: unknown, path = type.name): string[] {
  const problems: string[] = [];
  walkJson(type, json, path, problems);
  if (problems.length === 0) checkRules(type, json as Plain, path, problems, false);
  return problems;
}

function walkJson(type: protobuf.Type, json: unknown, path: string, problems: string[]): void {
  const name = type.fullName.slice(1);
  if (name === 'google.protobuf.Duration') {
    if (typeof json !== 'string' || !/^\d+(\.\d{1,9})?s$/.test(json))
      problems.push(`${path}: "${String(json)}" is not a duration`);
    return;
  }
  if (name === 'google.protobuf.Struct' || name === 'google.protobuf.Value') return;
  if (/^google\.protobuf\.\w+Value$/.test(name)) {
    if (typeof json !== 'number' && typeof json !== 'string' && typeof json !== 'boolean')
      problems.push(`${path}: not a bare ${name}`);
    return;
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    problems.push(`${path}: not an object`);
    return;
  }
  let fieldsOf = type;
  if (name === anyName) {
    const url = (json as Plain)['@type'];
    try {
      fieldsOf = envoyType(String(url));
    } catch {
      problems.push(`${path}: Any type URL "${String(url)}" names no Envoy message`);
      return;
    }
  }
  for (const [key, value] of Object.entries(json)) {
    if (key === '@type' && name === anyName) continue;
    const field = fieldsOf.fields[key];
    if (field === undefined) {
      problems.push(`${path}.${key}: not a field of ${fieldsOf.fullName}`);
      continue;
    }
    walkJsonField(field, value, `${path}.${key}`, problems);
  }
}

function walkJsonField(field: protobuf.Field, value: unknown, at: string, problems: string[]): void {
  const values: [string, unknown][] =
    field instanceof protobuf.MapField
      ? Object.entries(value as Plain).map(([k, v]) => [`${at}[${k}]`, v])
      : field.repeated
        ? Array.isArray(value)
          ? value.map((v, i) => [`${at}[${i}]`, v])
          : [[at, Symbol('not an array')]]
        : [[at, value]];
  for (const [p, v] of values) {
    if (typeof v === 'symbol') {
      problems.push(`${p}: must be a list`);
      continue;
    }
    const t = field.resolvedType;
    if (t instanceof protobuf.Type) walkJson(t, v, p, problems);
    else if (t instanceof protobuf.Enum) {
      if (!(String(v) in t.values) && !Object.values(t.values).includes(Number(v)))
        problems.push(`${p}: ${String(v)} is not a value of ${t.name}`);
    } else if (field.type === 'string' && typeof v !== 'string') problems.push(`${p}: not a string`);
    else if (field.type === 'bool' && typeof v !== 'boolean') problems.push(`${p}: not a boolean`);
    else if (
      /int|fixed|double|float/.test(field.type) &&
      typeof v !== 'number' &&
      !/^-?\d+$/.test(String(v))
    ) {
      problems.push(`${p}: not a number`);
    }
  }
}
