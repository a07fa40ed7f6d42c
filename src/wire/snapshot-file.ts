// The snapshot file of `slipway snapshot save` and `restore` (docs/decisions/0021):
//
//   SLIPWAY-SNAPSHOT\n                     magic line
//   {"format":1,"index":..,...}\n          one JSON line: the header below
//   BYTES bytes                            the state machine's snapshot (ReplicatedState encoding)
//
// The header names the raft index and term the state reflects, the voters and learners there,
// the state's length and SHA-256 (hex), when it was saved and by which build. Restore checks all
// of it before writing anything.
//
// The format is what the CLI's save and the node's offline restore (src/node/snapshot-seed.ts)
// agree on: the CLI writes it, the restore reads it and seeds a data directory from it.
import { createHash } from 'node:crypto';
import { z } from 'zod';

export const snapshotFileMagic = 'SLIPWAY-SNAPSHOT\n';
export const snapshotFileFormat = 1;
/** The header line is small; a longer one means the file is not ours. */
const headerBytesMax = 1 << 20;

const member = z.object({ id: z.string().min(1), addr: z.string(), apiAddr: z.string() });

const headerSchema = z.object({
  format: z.literal(snapshotFileFormat),
  index: z.number().int().positive(),
  term: z.number().int().positive(),
  voters: z.array(member).min(1),
  learners: z.array(member),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  savedAt: z.string(),
  build: z.string(),
});

export type SnapshotFileHeader = z.infer<typeof headerSchema>;

export class SnapshotFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotFileError';
  }
}

/** The magic line and the header line, as written before the state bytes. */
export function encodeSnapshotFileHead(header: SnapshotFileHeader): Buffer {
  return Buffer.from(`${snapshotFileMagic}${JSON.stringify(header)}\n`, 'utf8');
}

export interface SnapshotFile {
  readonly header: SnapshotFileHeader;
  readonly data: Uint8Array;
}

/**
 * Checks a snapshot file's bytes (read from `path`, which the messages name): magic, header,
 * length and checksum. Whether the state decodes is the restore's to check.
 */
export function parseSnapshotFile(path: string, raw: Buffer): SnapshotFile {
  const magic = Buffer.from(snapshotFileMagic, 'utf8');
  if (raw.length < magic.length || !raw.subarray(0, magic.length).equals(magic)) {
    throw new SnapshotFileError(
      `${path} is not a slipway snapshot (no ${JSON.stringify(snapshotFileMagic.trim())} line)`,
    );
  }
  const end = raw.indexOf(0x0a, magic.length);
  if (end < 0 || end - magic.length > headerBytesMax) {
    throw new SnapshotFileError(`${path}: the header line is missing or cut short`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.subarray(magic.length, end).toString('utf8'));
  } catch (err) {
    throw new SnapshotFileError(`${path}: the header is not JSON: ${(err as Error).message}`);
  }
  const format = (parsed as { format?: unknown } | null)?.format;
  if (typeof format === 'number' && format !== snapshotFileFormat) {
    throw new SnapshotFileError(
      `${path}: snapshot file format ${format}; this build reads format ${snapshotFileFormat}`,
    );
  }
  const checked = headerSchema.safeParse(parsed);
  if (!checked.success) {
    const why = checked.error.issues.map((i) => `${i.path.join('.') || '(header)'}: ${i.message}`);
    throw new SnapshotFileError(`${path}: invalid header: ${why.join('; ')}`);
  }
  const header = checked.data;
  const data = raw.subarray(end + 1);
  if (data.length !== header.bytes) {
    throw new SnapshotFileError(
      `${path}: the header says ${header.bytes} bytes of state but the file holds ${data.length} (truncated or appended to)`,
    );
  }
  const sha256 = createHash('sha256').update(data).digest('hex');
  if (sha256 !== header.sha256) {
    throw new SnapshotFileError(
      `${path}: checksum mismatch (sha256 ${sha256}, header says ${header.sha256})`,
    );
  }
  return { header, data };
}
