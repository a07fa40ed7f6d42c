// oci2disk: pulls a disk image pushed to an OCI registry as an artifact (`oras push
// REGISTRY/REPO:TAG debian.raw.gz`) and writes it to DEST_DISK, as Tinkerbell's hub action does.
//
//   IMG_URL            REGISTRY/REPOSITORY:TAG or @sha256:DIGEST, e.g. 192.168.0.173/test/debian:raw.gz;
//                      HTTPS, or plain HTTP for localhost and 127.0.0.0/8 (or with an http:// prefix)
//   DEST_DISK          a block device (or a regular file, for tests and VM images)
//   COMPRESSED         true: decompress by IMG_URL's suffix, .gz (gzip), .zs/.zst (zstd), .xz or .bzip2/.bz2
//   REGISTRY_USERNAME, REGISTRY_PASSWORD  optional: for the registry's Basic or Bearer token auth
//   SKIP_VERIFY        true: do not verify the registry's TLS certificate (default false)
//
// The manifest's layer of media type application/vnd.oci.image.layer.v1.tar (oras's default, the
// one Tinkerbell's takes) is streamed through image2disk's writer: its SHA-256 digest is checked
// before the disk's first MiB is written. A registry that cannot be reached, answers no such
// image, or asks for credentials not given, fails the action naming the registry.
import { createHash } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import type { Compression } from './decompress.js';
import { writeImage } from './image2disk.js';
import { checkChoiceSettings, optionalSetting, requiredSetting } from './settings.js';
import { inspectTarget } from './target-disk.js';

const layerMediaType = 'application/vnd.oci.image.layer.v1.tar';
const manifestTypes = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
];
const manifestBytesMax = 4 * 1024 * 1024;
const redirectsMax = 5;
const suffixCompressions: Readonly<Record<string, Compression>> = {
  '.gz': 'gzip',
  '.zs': 'zstd',
  '.zst': 'zstd',
  '.xz': 'xz',
  '.bzip2': 'bzip2',
  '.bz2': 'bzip2',
};

export interface ImageReference {
  readonly scheme: 'http' | 'https';
  /** host[:port] */
  readonly registry: string;
  readonly repository: string;
  /** A tag or a digest (sha256:…). */
  readonly reference: string;
}

interface Session {
  readonly image: ImageReference;
  readonly insecure: boolean;
  readonly credentials: { readonly username: string; readonly password: string } | undefined;
  readonly signal: AbortSignal;
  authorization?: string;
  /** Where `authorization` may go: the registry, or its token service for the token request. */
  readonly authorizationHost?: string;
}

export async function oci2disk(ctx: BuiltinContext): Promise<BuiltinDone> {
  const imgUrl = requiredSetting(ctx.env, 'IMG_URL').trim();
  const dest = requiredSetting(ctx.env, 'DEST_DISK');
  checkChoiceSettings('oci2disk', ctx.env);
  const image = parseImageReference(imgUrl);
  const compressed = optionalSetting(ctx.env, 'COMPRESSED')?.trim() === 'true';
  const compression = compressed ? compressionOf(imgUrl) : undefined;
  const username = optionalSetting(ctx.env, 'REGISTRY_USERNAME');
  const password = optionalSetting(ctx.env, 'REGISTRY_PASSWORD');
  const session: Session = {
    image,
    insecure: optionalSetting(ctx.env, 'SKIP_VERIFY')?.trim() === 'true',
    credentials: username !== undefined && password !== undefined ? { username, password } : undefined,
    signal: ctx.signal,
  };
  const target = await inspectTarget(dest);
  const layer = await imageLayer(session);
  if (compression === undefined && target.capacityBytes !== undefined && layer.size > target.capacityBytes) {
    throw new ActionError(
      `disk too small: the image ${imgUrl} is ${layer.size} bytes and DEST_DISK ${dest} holds ${target.capacityBytes}`,
    );
  }
  const blob = await registryGet(session, `blobs/${layer.digest}`, '*/*');
  if (blob.statusCode !== 200) {
    blob.resume();
    throw new ActionError(
      `registry ${image.registry} answered ${blob.statusCode} for the layer ${layer.digest} of ${imgUrl}`,
    );
  }
  ctx.progress(`pulling ${imgUrl} (${layer.size} bytes, ${layer.digest}) to ${dest}`);
  const hash = createHash('sha256');
  async function* hashed(): AsyncGenerator<Buffer> {
    for await (const chunk of blob as AsyncIterable<Buffer>) {
      hash.update(chunk);
      yield chunk;
    }
  }
  try {
    const line = await writeImage(
      { source: hashed(), compression, dest, capacityBytes: target.capacityBytes },
      ctx,
      () => {
        const actual = `sha256:${hash.digest('hex')}`;
        if (actual !== layer.digest) {
          throw new ActionError(
            `the layer of ${imgUrl} has digest ${actual}, not the manifest's ${layer.digest}; ` +
              `the first MiB of ${dest} is zeroed so the machine cannot boot it`,
          );
        }
        return `, digest ${layer.digest} verified`;
      },
    );
    return { message: line };
  } finally {
    blob.destroy();
  }
}

/** `registry[:port]/repository[:tag|@digest]`, with an optional http:// or https:// prefix. */
export function parseImageReference(value: string): ImageReference {
  const usage = 'give REGISTRY/REPOSITORY:TAG, e.g. 192.168.0.173/test/debian:raw.gz';
  const scheme = /^(https?):\/\//.exec(value)?.[1] as 'http' | 'https' | undefined;
  const rest = scheme === undefined ? value : value.slice(scheme.length + 3);
  const slash = rest.indexOf('/');
  const registry = slash < 0 ? '' : rest.slice(0, slash);
  if (
    registry === '' ||
    !/^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?$/.test(registry)
  ) {
    throw new ActionError(`IMG_URL ${value} names no registry; ${usage}`);
  }
  if (
    scheme === undefined &&
    !registry.includes('.') &&
    !registry.includes(':') &&
    !registry.startsWith('localhost')
  ) {
    throw new ActionError(`IMG_URL ${value} names no registry (${registry} is not a host name); ${usage}`);
  }
  const path = rest.slice(slash + 1);
  const match = /^([a-z0-9]+(?:[._/-][a-z0-9]+)*)(?::([\w][\w.-]{0,127}))?(?:@(sha256:[0-9a-f]{64}))?$/.exec(
    path,
  );
  if (match === null)
    throw new ActionError(`IMG_URL ${value} is not a repository with a tag or digest; ${usage}`);
  const [, repository = '', tag, digest] = match;
  const host = registry.replace(/:[0-9]+$/, '');
  const local = host === 'localhost' || host.startsWith('127.') || host === '[::1]';
  return {
    scheme: scheme ?? (local ? 'http' : 'https'),
    registry,
    repository,
    reference: digest ?? tag ?? 'latest',
  };
}

/** Tinkerbell's rule: the decompressor is chosen by the suffix of IMG_URL (its tag). */
function compressionOf(imgUrl: string): Compression {
  const suffix = /\.[A-Za-z0-9]+$/.exec(imgUrl)?.[0] ?? '';
  const compression = suffixCompressions[suffix];
  if (compression !== undefined) return compression;
  throw new ActionError(
    `IMG_URL ${imgUrl} has no compression suffix (.gz, .zs, .zst, .xz, .bzip2 or .bz2) and COMPRESSED is true; tag it so, or set COMPRESSED=false`,
  );
}

interface Layer {
  readonly digest: string;
  readonly size: number;
}

async function imageLayer(session: Session): Promise<Layer> {
  const { image } = session;
  const name = `${image.registry}/${image.repository}:${image.reference}`;
  const response = await registryGet(session, `manifests/${image.reference}`, manifestTypes.join(', '));
  const text = await readText(response, manifestBytesMax);
  if (response.statusCode === 404)
    throw new ActionError(`registry ${image.registry} has no image ${name} (404)`);
  if (response.statusCode !== 200) {
    throw new ActionError(
      `registry ${image.registry} answered ${response.statusCode} for the manifest of ${name}`,
    );
  }
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch {
    throw new ActionError(`registry ${image.registry} sent a manifest for ${name} that is not JSON`);
  }
  const layers = (manifest as { layers?: unknown }).layers;
  if (!Array.isArray(layers)) {
    throw new ActionError(
      `the manifest of ${name} lists no layers (an image index? give one manifest's digest)`,
    );
  }
  const found = (layers as { mediaType?: unknown; digest?: unknown; size?: unknown }[]).filter(
    (layer) => layer.mediaType === layerMediaType,
  );
  const [layer] = found;
  if (layer === undefined || found.length > 1) {
    const types = layers.map((l: { mediaType?: unknown }) => String(l.mediaType)).join(', ');
    throw new ActionError(
      `${name} must have one layer of type ${layerMediaType} (as oras push makes), it has: ${types || 'none'}`,
    );
  }
  if (
    typeof layer.digest !== 'string' ||
    !/^sha256:[0-9a-f]{64}$/.test(layer.digest) ||
    typeof layer.size !== 'number'
  ) {
    throw new ActionError(`the layer of ${name} has no sha256 digest and size`);
  }
  return { digest: layer.digest, size: layer.size };
}

/** A GET on the registry's API, authenticating once when it asks (Bearer token or Basic). */
async function registryGet(session: Session, path: string, accept: string): Promise<IncomingMessage> {
  const { image } = session;
  const url = new URL(`${image.scheme}://${image.registry}/v2/${image.repository}/${path}`);
  const first = await get(session, url, accept);
  if (first.statusCode !== 401) return first;
  first.resume();
  const challenge = first.headers['www-authenticate'] ?? '';
  session.authorization = await authorize(session, challenge);
  const second = await get(session, url, accept);
  if (second.statusCode === 401 || second.statusCode === 403) {
    second.resume();
    throw new ActionError(
      `registry ${image.registry} refused the credentials in REGISTRY_USERNAME and REGISTRY_PASSWORD`,
    );
  }
  return second;
}

async function authorize(session: Session, challenge: string): Promise<string> {
  const { image, credentials } = session;
  const basic =
    credentials === undefined
      ? undefined
      : `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
  if (/^basic\b/i.test(challenge)) {
    if (basic === undefined) {
      throw new ActionError(
        `registry ${image.registry} asks for credentials: set REGISTRY_USERNAME and REGISTRY_PASSWORD`,
      );
    }
    return basic;
  }
  const params = new Map([...challenge.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
  const realmText = params.get('realm');
  if (!/^bearer\b/i.test(challenge) || realmText === undefined) {
    throw new ActionError(
      `registry ${image.registry} asks for authentication it does not describe (${challenge})`,
    );
  }
  const realm = new URL(realmText);
  for (const key of ['service', 'scope']) {
    const value = params.get(key);
    if (value !== undefined) realm.searchParams.set(key, value);
  }
  const tokenSession: Session = {
    ...session,
    authorizationHost: realm.host,
    ...(basic === undefined ? {} : { authorization: basic }),
  };
  const response = await get(tokenSession, realm, 'application/json');
  const text = await readText(response, 1024 * 1024);
  if (response.statusCode !== 200) {
    const hint = basic === undefined ? ': set REGISTRY_USERNAME and REGISTRY_PASSWORD' : '';
    throw new ActionError(
      `registry ${image.registry}'s token service ${realm.origin} answered ${response.statusCode}${hint}`,
    );
  }
  const body = JSON.parse(text) as { token?: unknown; access_token?: unknown };
  const token = typeof body.token === 'string' ? body.token : body.access_token;
  if (typeof token !== 'string')
    throw new ActionError(`registry ${image.registry}'s token service gave no token`);
  return `Bearer ${token}`;
}

/** One GET, following redirects (blobs often live elsewhere); credentials go to the registry only. */
async function get(session: Session, url: URL, accept: string, redirects = 0): Promise<IncomingMessage> {
  const { image } = session;
  const sameHost = url.host === (session.authorizationHost ?? image.registry);
  const headers: Record<string, string> = { accept };
  if (session.authorization !== undefined && sameHost) headers['authorization'] = session.authorization;
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const options = { headers, signal: session.signal, rejectUnauthorized: !session.insecure };
    const request =
      url.protocol === 'https:' ? httpsRequest(url, options, resolve) : httpRequest(url, options, resolve);
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (session.signal.aborted) reject(error);
      else
        reject(
          new ActionError(
            `cannot reach registry ${url.host} for IMG_URL ${image.registry}/${image.repository}: ${error.message}`,
          ),
        );
    });
    request.end();
  });
  const location = response.headers.location;
  if (
    response.statusCode !== undefined &&
    response.statusCode >= 300 &&
    response.statusCode < 400 &&
    location !== undefined
  ) {
    response.resume();
    if (redirects >= redirectsMax)
      throw new ActionError(`registry ${image.registry} redirected more than ${redirectsMax} times`);
    return get(session, new URL(location, url), accept, redirects + 1);
  }
  return response;
}

async function readText(response: IncomingMessage, bytesMax: number): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > bytesMax) {
      response.destroy();
      throw new ActionError(`the registry's answer is larger than ${bytesMax} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
