// qemuimg2disk: converts a disk image served over HTTP (qcow2, as cloud images are, or any format
// qemu-img reads) onto DEST_DISK, as Tinkerbell's hub action does: with qemu-img, reading the
// image through its curl driver by range requests, so the image is never held whole or stored.
//
//   IMG_URL     http:// or https://; its server must answer HEAD with 200 and take range requests
//   DEST_DISK   a block device (or a regular file, for tests and VM images)
//   FORMAT      what is written: host_device (default, for a block device) or raw (the default
//               for a regular file)
//   EXTRA_ARGS  more arguments for `qemu-img convert`, split at spaces (e.g. "-W" or "-m 16")
//
// Checked before the disk is touched: the disk exists, the server answers and takes ranges (qemu's
// own message for a server that does not is obscure), and the image's virtual size fits the disk.
// Then `qemu-img convert -p -m 1`, its progress reported every tenth; the kernel is told of the new
// partition table afterwards, as image2disk does. Needs qemu-img (Debian's qemu-utils) and its
// curl driver (qemu-block-extra) on the machine.
import { ActionError, type BuiltinContext, type BuiltinDone } from './action.js';
import { rereadPartitions } from './image2disk.js';
import { runProgram, runStreamed } from './program.js';
import { checkChoiceSettings, optionalSetting, requiredSetting } from './settings.js';
import { inspectTarget } from './target-disk.js';

/** Progress is reported at each of these steps of qemu-img's percentage. */
const progressStepPercent = 10;
const pathDefault = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

interface ImageInfo {
  readonly format: string;
  readonly virtualBytes: number;
}

export async function qemuimg2disk(ctx: BuiltinContext): Promise<BuiltinDone> {
  const url = urlSetting(requiredSetting(ctx.env, 'IMG_URL'));
  const dest = requiredSetting(ctx.env, 'DEST_DISK');
  checkChoiceSettings('qemuimg2disk', ctx.env);
  const extra = (optionalSetting(ctx.env, 'EXTRA_ARGS') ?? '').split(/\s+/).filter((arg) => arg !== '');
  const target = await inspectTarget(dest);
  const format =
    optionalSetting(ctx.env, 'FORMAT')?.trim() ??
    (target.capacityBytes === undefined ? 'raw' : 'host_device');
  await checkServer(url, ctx.signal);
  const info = await imageInfo(url, ctx.signal);
  if (target.capacityBytes !== undefined && info.virtualBytes > target.capacityBytes) {
    throw new ActionError(
      `disk too small: the ${info.format} image at ${url} holds ${info.virtualBytes} bytes and ` +
        `DEST_DISK ${dest} holds ${target.capacityBytes}`,
    );
  }
  ctx.progress(`converting the ${info.format} image ${url} (${info.virtualBytes} bytes) to ${dest}`);
  const started = Date.now();
  let reported = -progressStepPercent;
  let said = '';
  const onLine = (line: string): void => {
    const text = line.trim();
    if (text === '') return;
    const percent = /^\((\d+(?:\.\d+)?)\/100%\)$/.exec(text)?.[1];
    if (percent === undefined) {
      said = text;
      ctx.progress(text);
      return;
    }
    if (Number(percent) < reported + progressStepPercent) return;
    reported = Math.floor(Number(percent) / progressStepPercent) * progressStepPercent;
    ctx.progress(`converted ${reported}%`);
  };
  // One request at a time (-m 1): with several in flight (the default, 8), Debian's qemu-img 7.2
  // over its curl driver hung after converting in 4 runs of 15 against a Node.js server, and in
  // none of 45 with one. EXTRA_ARGS come after, so `-m 8` there still wins.
  const argv = ['qemu-img', 'convert', '-p', '-m', '1', url, '-O', format, dest, ...extra];
  const env = { PATH: pathDefault };
  const status = await runStreamed(argv, { env, signal: ctx.signal, onLine, carriageReturnEndsLine: true });
  if (status !== 0) {
    throw new ActionError(`${argv.join(' ')} exited with status ${status}${said === '' ? '' : `: ${said}`}`);
  }
  if (target.capacityBytes !== undefined) await rereadPartitions(dest, ctx);
  const line =
    `wrote the ${info.format} image ${url} (${info.virtualBytes} bytes) to ${dest} as ${format} ` +
    `in ${((Date.now() - started) / 1000).toFixed(1)} s`;
  ctx.progress(line);
  return { message: line };
}

function urlSetting(value: string): string {
  let parsed: URL;
  try {
    parsed = new URL(value.trim());
  } catch {
    throw new ActionError(`IMG_URL ${value} is not a URL; give an http:// or https:// URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ActionError(`IMG_URL ${value} is not an http:// or https:// URL`);
  }
  return parsed.href;
}

/** qemu-img's curl driver asks HEAD for the size and then reads by ranges: both must work. */
async function checkServer(url: string, signal: AbortSignal): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, { method: 'HEAD', signal, redirect: 'follow' });
  } catch (error) {
    if (signal.aborted) throw error;
    const why = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
    throw new ActionError(`cannot fetch IMG_URL ${url}: ${why}`);
  }
  if (response.status !== 200) {
    throw new ActionError(
      `IMG_URL ${url} answered ${response.status} ${response.statusText}; it must answer 200 with the image`,
    );
  }
  if (response.headers.get('accept-ranges') !== 'bytes') {
    throw new ActionError(
      `IMG_URL ${url} is served without range requests (no "Accept-Ranges: bytes"), which qemu-img ` +
        'reads the image by; serve it from a server that takes them, or write a raw image with image2disk',
    );
  }
}

/** The image's format and virtual size, as qemu-img reads them from its header. */
async function imageInfo(url: string, signal: AbortSignal): Promise<ImageInfo> {
  const text = await runProgram(['qemu-img', 'info', '--output=json', url], signal);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ActionError(`qemu-img info ${url} printed no JSON: ${text.slice(0, 200)}`);
  }
  const fields = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  const format = fields['format'];
  const virtualBytes = fields['virtual-size'];
  if (typeof format !== 'string' || typeof virtualBytes !== 'number') {
    throw new ActionError(`qemu-img info ${url} gave no format and virtual size: ${text.slice(0, 200)}`);
  }
  return { format, virtualBytes };
}
