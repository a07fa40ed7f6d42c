// `slipway snapshot save|restore`: back the replicated state up to a file, and seed a new
// cluster's members from one (docs/decisions/0021-backup-and-recovery.md; the file format is in
// src/wire/snapshot-file.ts; the offline restore is src/node/snapshot-seed.ts).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from '@commander-js/extra-typings';
import type { ClusterClient } from '../client.js';
import { idAddressList } from '../flags.js';
import type { OutputFormat } from '../output.js';
import { render, UsageError } from '../output.js';
import type { SnapshotFileHeader } from '../../wire/snapshot-file.js';
import { isHostPort } from '../../platform/host-port.js';
import { syncDirectory } from '../../platform/sync-directory.js';
import { isMemberId, memberIdForm } from '../../model/member-id.js';

type Connect = () => { client: ClusterClient; output: OutputFormat };

export function snapshotCommand(program: Command, connect: Connect, output: () => OutputFormat): void {
  const s = program
    .command('snapshot')
    .description('back up the replicated state to a file, or seed a new cluster from one (admin only)');
  s.command('save')
    .description("save a consistent snapshot of the cluster's state (from the leader) to FILE")
    .argument('<file>', 'where to write it (written to a temporary file beside it, then renamed)')
    .option('--force', 'replace FILE if it exists')
    .action((file, o) => saveSnapshot(file, o.force === true, connect));
  s.command('restore')
    .description(
      'seed a new data directory from FILE as one member of a new cluster; run it for every member with the same --peers, then start each with `slipway server --data-dir DIR --id ID`',
    )
    .argument('<file>', 'a file from `slipway snapshot save`')
    .requiredOption('--data-dir <dir>', "the new member's data directory (new or empty)")
    .requiredOption('--id <id>', "the new member's id")
    .requiredOption(
      '--peers <list>',
      'the new cluster as ID=HOST:PORT,... (raft addresses, this member included)',
    )
    .action((file, o) => restoreSnapshot(file, o, output));
}

/**
 * `snapshot save`: the leader's snapshot streamed into a temporary file beside FILE, checked
 * against the size and checksum its header announced, synced, then renamed to FILE.
 */
async function saveSnapshot(file: string, force: boolean, connect: Connect): Promise<void> {
  // The file format loads only when a snapshot is saved.
  const { encodeSnapshotFileHead, snapshotFileFormat } = await import('../../wire/snapshot-file.js');
  const target = resolve(file);
  const dir = dirname(target);
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new UsageError(`cannot write ${file}: ${dir} is not a directory`);
  if (existsSync(target)) {
    if (statSync(target).isDirectory()) throw new UsageError(`${file} is a directory`);
    if (!force) throw new UsageError(`${file} exists; pass --force to replace it`);
  }
  const { client, output: format } = connect();
  const tmp = join(dir, `.${basename(target)}.${randomBytes(6).toString('hex')}.partial`);
  let fh: FileHandle;
  try {
    fh = await open(tmp, 'wx', 0o600);
  } catch (err) {
    throw new UsageError(`cannot write in ${dir}: ${(err as Error).message}`);
  }
  let closed = false;
  try {
    const { header, sha256 } = await receiveSnapshot(client, fh, {
      format: snapshotFileFormat,
      encodeHead: encodeSnapshotFileHead,
    });
    await fh.sync();
    await fh.close();
    closed = true;
    if (!force && existsSync(target))
      throw new UsageError(`${file} appeared while saving; pass --force to replace it`);
    await rename(tmp, target);
    await syncDirectory(dir);
    const doc = { file: target, index: header.index, term: header.term, bytes: header.bytes, sha256 };
    process.stdout.write(
      `${render(format, doc, [{ file: target, index: header.index, term: header.term, bytes: header.bytes }])}\n`,
    );
  } catch (err) {
    if (!closed) await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Writes the snapshot stream to `fh`: the file's head (the server's header in the file's `format`)
 * first, then the state's bytes. Refuses a stream that is out of order, longer or shorter than announced,
 * or whose checksum differs. Returns the header and the received bytes' SHA-256.
 */
async function receiveSnapshot(
  client: ClusterClient,
  fh: FileHandle,
  file: { format: SnapshotFileHeader['format']; encodeHead: (header: SnapshotFileHeader) => Buffer },
): Promise<{ header: SnapshotFileHeader; sha256: string }> {
  let header: SnapshotFileHeader | undefined;
  const hash = createHash('sha256');
  let received = 0;
  await client.snapshotSave(async (msg) => {
    if (header === undefined) {
      const h = msg.header;
      if (h === undefined) throw new Error('the server sent state before its header');
      header = {
        format: file.format,
        index: h.index,
        term: h.term,
        voters: h.voters.map((m) => ({ id: m.id, addr: m.raftAddr, apiAddr: m.apiAddr })),
        learners: h.learners.map((m) => ({ id: m.id, addr: m.raftAddr, apiAddr: m.apiAddr })),
        bytes: h.bytes,
        sha256: h.sha256,
        savedAt: new Date().toISOString(),
        build: h.build,
      };
      await fh.write(file.encodeHead(header));
      return;
    }
    if (msg.header !== undefined) throw new Error('the server sent a second header');
    received += msg.chunk.length;
    if (received > header.bytes)
      throw new Error(`the server sent more than the ${header.bytes} bytes its header announced`);
    hash.update(msg.chunk);
    await fh.write(msg.chunk);
  });
  if (header === undefined) throw new Error('the snapshot stream ended before its header');
  if (received !== header.bytes)
    throw new Error(`the snapshot stream ended after ${received} of ${header.bytes} bytes`);
  const sha256 = hash.digest('hex');
  if (sha256 !== header.sha256)
    throw new Error(`checksum mismatch: received sha256 ${sha256}, the server announced ${header.sha256}`);
  return { header, sha256 };
}

interface RestoreFlags {
  readonly dataDir: string;
  readonly id: string;
  readonly peers: string;
}

/** `snapshot restore`: seeds a new member's data directory from FILE, as one of --peers. */
async function restoreSnapshot(file: string, o: RestoreFlags, output: () => OutputFormat): Promise<void> {
  // The offline restore (the file format, the log store, the state machine) loads only for it.
  const { readSnapshotFile, seedDataDir, SnapshotFileError } = await import('../../node/snapshot-seed.js');
  const peers = newClusterPeers(o.peers, o.id);
  try {
    const snap = readSnapshotFile(file);
    const meta = await seedDataDir(
      o.dataDir,
      snap,
      peers.map((p) => ({ id: p.id, addr: p.addr, apiAddr: '' })),
    );
    const doc = {
      dataDir: resolve(o.dataDir),
      id: o.id,
      index: meta.index,
      term: meta.term,
      bytes: snap.header.bytes,
      voters: peers.map((p) => p.id),
    };
    process.stdout.write(
      `${render(output(), doc, [{ dataDir: doc.dataDir, id: o.id, index: meta.index, term: meta.term, voters: doc.voters.join(',') }])}\n`,
    );
  } catch (err) {
    if (err instanceof SnapshotFileError) throw new UsageError(err.message);
    throw err;
  }
}

/** The new cluster's members from --peers, checked: valid, distinct ids, this member among them. */
function newClusterPeers(list: string, id: string): { id: string; addr: string }[] {
  const peers = idAddressList(list, '--peers');
  if (!isMemberId(id)) throw new UsageError(`--id "${id}" must be ${memberIdForm}`);
  if (peers.length === 0) throw new UsageError("--peers must name the new cluster's members");
  for (const p of peers) {
    if (!isMemberId(p.id)) throw new UsageError(`--peers: member id "${p.id}" is not valid`);
    if (!isHostPort(p.addr)) throw new UsageError(`--peers: "${p.addr}" must be HOST:PORT`);
  }
  if (new Set(peers.map((p) => p.id)).size !== peers.length)
    throw new UsageError('--peers has a duplicate id');
  if (!peers.some((p) => p.id === id)) throw new UsageError(`--peers must include this member (${id})`);
  return peers;
}
