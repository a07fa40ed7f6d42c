// Every bound the TFTP server enforces, in one place, with the defaults operators get.
// Pure: imported by the transfer core as well as the dgram driver.

/** Protocol ranges fixed by the RFCs; the server's own maxima must lie inside them. */
export const BLOCK_SIZE_DEFAULT = 512; // RFC 1350
export const BLOCK_SIZE_MIN = 8; // RFC 2348
export const BLOCK_SIZE_LIMIT = 65464; // RFC 2348
export const WINDOW_SIZE_LIMIT = 65535; // RFC 7440
export const TIMEOUT_S_MIN = 1; // RFC 2349
export const TIMEOUT_S_MAX = 255; // RFC 2349

/** What one transfer may negotiate and how hard it tries before giving up. */
export interface TransferLimits {
  /** Largest blksize granted. 1468 fills a 1500-byte Ethernet frame after IP/UDP/TFTP headers. */
  readonly blockSizeMax: number;
  /** Largest windowsize granted (RFC 7440); bounds the burst one ACK can trigger. */
  readonly windowSizeMax: number;
  /** Retransmission timeout when the client negotiates none. */
  readonly timeoutMs: number;
  /** Exponential backoff stops growing here. */
  readonly timeoutMaxMs: number;
  /** Retransmissions of one unacknowledged window before the transfer is abandoned. */
  readonly retriesMax: number;
}

export const TRANSFER_LIMITS_DEFAULT: TransferLimits = {
  blockSizeMax: 1468,
  windowSizeMax: 16,
  timeoutMs: 1000,
  timeoutMaxMs: 8000,
  retriesMax: 5,
};

/** Bounds on the server as a whole. */
export interface ServerLimits {
  /**
   * Transfers in progress (including ones still resolving their file). A request beyond it is
   * dropped without a reply: the client retransmits it and is served once a slot frees, where
   * an ERROR would make PXE firmware give up the boot.
   */
  readonly transfersMax: number;
  /** Total bytes of file contents kept in the LRU cache. */
  readonly cacheBytesMax: number;
  /** Largest file served; TFTP is for boot loaders, bigger artifacts belong on HTTP. */
  readonly fileBytesMax: number;
}

export const SERVER_LIMITS_DEFAULT: ServerLimits = {
  // Each transfer costs a socket and a little state; file contents are shared between them.
  transfersMax: 256,
  cacheBytesMax: 32 * 1024 * 1024,
  fileBytesMax: 64 * 1024 * 1024,
};

function requireIntegerIn(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
}

/** Throws a RangeError naming the first bad field, so a misconfiguration fails at startup. */
export function assertValidTransferLimits(limits: TransferLimits): void {
  requireIntegerIn('blockSizeMax', limits.blockSizeMax, BLOCK_SIZE_MIN, BLOCK_SIZE_LIMIT);
  requireIntegerIn('windowSizeMax', limits.windowSizeMax, 1, WINDOW_SIZE_LIMIT);
  requireIntegerIn('timeoutMs', limits.timeoutMs, 1, 3_600_000);
  requireIntegerIn('timeoutMaxMs', limits.timeoutMaxMs, limits.timeoutMs, 3_600_000);
  requireIntegerIn('retriesMax', limits.retriesMax, 0, 1000);
}

export function assertValidServerLimits(limits: ServerLimits): void {
  requireIntegerIn('transfersMax', limits.transfersMax, 1, 1_000_000);
  requireIntegerIn('cacheBytesMax', limits.cacheBytesMax, 0, Number.MAX_SAFE_INTEGER);
  requireIntegerIn('fileBytesMax', limits.fileBytesMax, 0, 2 ** 31 - 1);
}

/** Worker threads running transfers; 0 and 1 both mean the server's own thread. */
export const TRANSFER_WORKERS_MAX = 64;

export function assertValidWorkerCount(workers: number): void {
  requireIntegerIn('workers', workers, 0, TRANSFER_WORKERS_MAX);
}
