// Real `slipway worker` agents for machines of a ProcessCluster (test/support/process-cluster.ts):
// one process per machine, talking to every node with the machine's token, its journal and work
// directory under the cluster's; stopped by PID.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { slipwayBin, type ProcessCluster } from './process-cluster.js';

export class ClusterWorkers {
  readonly #cluster: ProcessCluster;
  /** Runs the CLI against the cluster and gives its standard output; throws when it fails. */
  readonly #ok: (args: readonly string[]) => Promise<string>;
  readonly #workers: ChildProcess[] = [];

  constructor(cluster: ProcessCluster, ok: (args: readonly string[]) => Promise<string>) {
    this.#cluster = cluster;
    this.#ok = ok;
  }

  /** A worker agent for the machine, on every node, with the machine's token; its log in DIR/ID.worker.log. */
  async start(id: string): Promise<void> {
    const dir = this.#cluster.dir;
    const tokenFile = join(dir, `${id}.token`);
    writeFileSync(tokenFile, (await this.#ok(['hardware', 'token', id])).trim());
    mkdirSync(join(dir, 'journal', id), { recursive: true });
    const log = openSync(join(dir, `${id}.worker.log`), 'a');
    const servers = this.#cluster.apiAddrs().join(',');
    const args = ['worker', '--id', id, '--server', servers, '--token-file', tokenFile];
    const dirs = ['--journal-dir', join(dir, 'journal', id), '--work-dir', dir];
    this.#workers.push(
      spawn(process.execPath, [slipwayBin, ...args, ...dirs], { stdio: ['ignore', log, log] }),
    );
  }

  /** Kills every agent still running, by PID, and waits for each to exit. */
  async stop(): Promise<void> {
    for (const w of this.#workers) {
      if (w.exitCode !== null || w.signalCode !== null) continue;
      const exited = new Promise<void>((r) => w.once('exit', () => r()));
      w.kill('SIGKILL');
      await exited;
    }
  }
}
