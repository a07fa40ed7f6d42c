// The archive of collected workflows (`slipway server --workflow-archive PATH`,
// docs/decisions/0020-bounded-state.md): before the leader proposes the removal of finished
// workflows, it appends each as one JSON line (the workflow as the state holds it, with its kept
// events) and fsyncs, so a workflow leaves the replicated state only once it is on disk.
//
// PATH is one file, appended to; or a directory (one that exists, or a path ending in '/'), with
// a file per UTC day of archiving: workflows-YYYY-MM-DD.jsonl. The archive is at least once: a
// leader that dies between the write and the commit, or loses leadership, leaves lines that the
// next leader may write again (on its own disk); readers drop repeats by workflow id and finish
// time.
import { mkdirSync, statSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Workflow, WorkflowEvent } from '../model/records.js';
import { ConfigError } from './config.js';

/** One collected workflow as archived. */
export interface ArchiveEntry {
  readonly workflow: Workflow;
  /** Its kept events, oldest first. */
  readonly events: readonly WorkflowEvent[];
}

export type ArchiveTarget =
  { readonly kind: 'file'; readonly path: string } | { readonly kind: 'directory'; readonly path: string };

/** A directory's file for the UTC day of `nowMs`. */
export function archiveFileName(nowMs: number): string {
  return `workflows-${new Date(nowMs).toISOString().slice(0, 10)}.jsonl`;
}

/** One archive line: the workflow, its events, when and by which node it was archived. */
export function archiveLine(entry: ArchiveEntry, archivedMs: number, nodeId: string): string {
  return `${JSON.stringify({ workflow: entry.workflow, events: entry.events, archivedMs, archivedBy: nodeId })}\n`;
}

/**
 * What PATH names, checked at start so that a node with a bad archive refuses to start instead
 * of refusing every collection later: an existing directory, or a path ending in '/' (made),
 * holds a file per day; anything else is a file whose directory must exist.
 */
export function archiveTarget(path: string): ArchiveTarget {
  const what = `--workflow-archive ${path}`;
  const existing = statOrUndefined(path);
  if (existing?.isDirectory() === true) return { kind: 'directory', path };
  if (existing === undefined && path.endsWith('/')) {
    try {
      mkdirSync(path, { recursive: true, mode: 0o700 });
    } catch (err) {
      throw new ConfigError(`${what}: cannot make the directory: ${(err as Error).message}`);
    }
    return { kind: 'directory', path };
  }
  if (existing !== undefined && !existing.isFile()) {
    throw new ConfigError(`${what}: must be a regular file or a directory`);
  }
  if (statOrUndefined(dirname(path))?.isDirectory() !== true) {
    throw new ConfigError(`${what}: the directory ${dirname(path)} does not exist`);
  }
  return { kind: 'file', path };
}

function statOrUndefined(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

export class WorkflowArchive {
  readonly target: ArchiveTarget;
  readonly #nodeId: string;

  constructor(target: ArchiveTarget, nodeId: string) {
    this.target = target;
    this.#nodeId = nodeId;
  }

  /** The file a write at `nowMs` goes to. */
  fileFor(nowMs: number): string {
    return this.target.kind === 'file' ? this.target.path : join(this.target.path, archiveFileName(nowMs));
  }

  /**
   * Appends one line per entry and fsyncs the file (and its directory when the file is new);
   * resolves once the lines are durable, with the file written. Rejects on any failure: the
   * caller must then not propose the removal.
   */
  async append(entries: readonly ArchiveEntry[], nowMs: number): Promise<string> {
    const file = this.fileFor(nowMs);
    let text = entries.map((e) => archiveLine(e, nowMs, this.#nodeId)).join('');
    const created = (await stat(file).catch(() => undefined)) === undefined;
    const handle = await open(file, 'a+', 0o600);
    try {
      // A line torn by a crash mid-write must not swallow the next one.
      const { size } = await handle.stat();
      if (size > 0) {
        const last = Buffer.alloc(1);
        await handle.read(last, 0, 1, size - 1);
        if (last[0] !== 0x0a) text = `\n${text}`;
      }
      await handle.appendFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (created) await syncDirectory(dirname(file));
    return file;
  }
}

/** Makes a new file's directory entry durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
