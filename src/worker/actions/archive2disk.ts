// archive2disk: unpacks a tar archive fetched over HTTP onto a filesystem on the machine's disk,
// as Tinkerbell's hub action does (a root filesystem, or data preloaded under a directory).
//
//   ARCHIVE_URL       http:// or https://          ARCHIVE_TYPE  tar, targz or tarzst (Slipway's)
//   DEST_DISK         the partition to unpack onto  FS_TYPE       its filesystem
//   DEST_PATH         absolute directory inside that filesystem, made when missing (usually /)
//   TARFILE_CHECKSUM  optional ALGORITHM:HEX (sha256 or sha512) of the archive as served
//
// The hub's later versions require TARFILE_CHECKSUM unless
// INSECURE_NO_TARFILE_CHECKSUM_VERIFICATION is true; here it stays optional, as in the hub's
// v1.0.0 examples, so templates of either kind run.
// HTTP_CLIENT_TIMEOUT_MINUTES is not needed: the action's timeout bounds the download.
//
// The archive streams from the server through the decompressor into `tar -x` (GNU or busybox),
// never held whole: owners by number (the new system's, not the agent's), modes kept. A broken
// download resumes as image2disk's does. The checksum covers the stream and is known only at its
// end: a mismatch fails the action after unpacking, saying so.
import { spawn } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import { mkdir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { decompressor, type Compression } from './decompress.js';
import { openImage } from './image-source.js';
import { withMounted } from './mounted.js';
import { checkChoiceSettings, optionalSetting, requiredSetting } from './settings.js';

const compressions: Readonly<Record<string, Compression | undefined>> = {
  tar: undefined,
  targz: 'gzip',
  tarzst: 'zstd',
};
const checksumAlgorithms: Readonly<Record<string, number>> = { sha256: 64, sha512: 128 };
/** tar's error output kept for the failure message. */
const tarSaidBytesMax = 4096;

interface Checksum {
  readonly algorithm: string;
  readonly hex: string;
}

export async function archive2disk(ctx: BuiltinContext): Promise<BuiltinDone> {
  const url = requiredSetting(ctx.env, 'ARCHIVE_URL');
  const type = requiredSetting(ctx.env, 'ARCHIVE_TYPE');
  const device = requiredSetting(ctx.env, 'DEST_DISK');
  const fsType = requiredSetting(ctx.env, 'FS_TYPE');
  const destPath = destPathSetting(requiredSetting(ctx.env, 'DEST_PATH'));
  checkChoiceSettings('archive2disk', ctx.env);
  const checksum = checksumSetting(optionalSetting(ctx.env, 'TARFILE_CHECKSUM'));
  const compression = compressions[type];
  const request = { device, fsType, readOnly: false, deviceSetting: 'DEST_DISK' };
  const source = await openImage(url, ctx.signal, { onResume: ctx.progress, urlSetting: 'ARCHIVE_URL' });
  const hash = checksum === undefined ? undefined : createHash(checksum.algorithm);
  const bytes = await withMounted(request, ctx.signal, async (root) => {
    const target = await makeDirectory(root, destPath);
    ctx.progress(`unpacking ${url} (${type}) into ${destPath} on ${device}`);
    return unpack(source.body, compression, hash, target, ctx.signal);
  });
  if (checksum !== undefined && hash !== undefined) {
    const got = hash.digest('hex');
    if (got !== checksum.hex) {
      throw new ActionError(
        `ARCHIVE_URL ${url} has ${checksum.algorithm} ${got}, not TARFILE_CHECKSUM's ${checksum.hex}; ` +
          `its content is already unpacked into ${destPath} on ${device}: run the workflow again once the archive is right`,
      );
    }
  }
  const line = `unpacked ${bytes} bytes of ${url} (${type}) into ${destPath} on ${device}`;
  ctx.progress(line);
  return { message: line };
}

/** Streams `body` through the hash and decompressor into `tar -x` in `dir`; the bytes served. */
async function unpack(
  body: Readable,
  compression: Compression | undefined,
  hash: Hash | undefined,
  dir: string,
  signal: AbortSignal,
): Promise<number> {
  const tar = spawn('tar', ['-x', '--numeric-owner', '-f', '-', '-C', dir], {
    stdio: ['pipe', 'ignore', 'pipe'],
    signal,
  });
  let said = '';
  tar.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    said = (said + chunk).slice(-tarSaidBytesMax);
  });
  const exited = new Promise<number>((resolve, reject) => {
    tar.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT')
        reject(new ActionError('tar is not installed on this machine (not found on PATH)'));
      else reject(signal.aborted && signal.reason instanceof Error ? signal.reason : error);
    });
    tar.on('close', (code) => resolve(code ?? -1));
  });
  let bytes = 0;
  const counted = new PassThrough();
  counted.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    hash?.update(chunk);
  });
  const sink = tarInput(tar.stdin);
  const piped =
    compression === undefined
      ? pipeline(body, counted, sink, { signal })
      : pipeline(body, counted, decompressor(compression), sink, { signal });
  const fed = piped.then(
    () => undefined,
    (error: unknown): Error => {
      // tar must see its input end, or it waits for more.
      tar.stdin.destroy();
      return error instanceof Error ? error : new Error('the archive stream failed');
    },
  );
  const [status, feedError] = await Promise.all([exited, fed]);
  signal.throwIfAborted();
  if (status !== 0) {
    throw new ActionError(
      `tar could not unpack the archive (status ${status})${said.trim() === '' ? '' : `: ${said.trim()}`}`,
    );
  }
  if (feedError !== undefined) {
    if (feedError instanceof ActionError) throw feedError;
    throw new ActionError(`the archive could not be read: ${feedError.message}`);
  }
  return bytes;
}

/**
 * tar's input. tar may exit once it has read the end-of-archive blocks, before the padding after
 * them: the rest is then read and dropped (the checksum covers it) rather than failing on EPIPE.
 * A tar that stopped for a corrupt archive says so through its status.
 */
function tarInput(stdin: Writable): Writable {
  let closed = false;
  stdin.on('error', () => {
    closed = true;
  });
  return new Writable({
    write(chunk: Buffer, _encoding, done): void {
      if (closed || stdin.destroyed) {
        done();
        return;
      }
      stdin.write(chunk, (error) => {
        if (error !== undefined && error !== null) closed = true;
        done();
      });
    },
    final(done): void {
      // Whether tar took the end or had gone, its status says how it went.
      if (closed || stdin.destroyed) done();
      else stdin.end(() => done());
    },
  });
}

function destPathSetting(value: string): string {
  if (!value.startsWith('/')) throw new ActionError(`DEST_PATH=${value} must be an absolute path`);
  if (value.split('/').includes('..')) {
    throw new ActionError(`DEST_PATH=${value} must not contain ".." (it would leave the filesystem)`);
  }
  return path.posix.normalize(value);
}

/** DEST_PATH inside the mounted `root`, made when missing; a link leading out of it is refused. */
async function makeDirectory(root: string, destPath: string): Promise<string> {
  const wanted = path.join(root, destPath);
  await mkdir(wanted, { recursive: true, mode: 0o755 });
  const real = await realpath(wanted);
  if (real !== root && !real.startsWith(`${root}/`)) {
    throw new ActionError(`DEST_PATH ${destPath} leads out of the filesystem on DEST_DISK (a link)`);
  }
  return real;
}

function checksumSetting(value: string | undefined): Checksum | undefined {
  if (value === undefined) return undefined;
  const [algorithm = '', hex = ''] = value.trim().toLowerCase().split(':', 2);
  const length = checksumAlgorithms[algorithm];
  if (length === undefined || !new RegExp(`^[0-9a-f]{${length}}$`).test(hex)) {
    throw new ActionError(
      `TARFILE_CHECKSUM=${value} is not sha256:HEX (64 hex digits) or sha512:HEX (128 hex digits)`,
    );
  }
  return { algorithm, hex };
}
