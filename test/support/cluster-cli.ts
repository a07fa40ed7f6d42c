// The CLI against a ProcessCluster, and worker agents for its machines, as the CLI-driven cluster
// tests (selection, pools) use them: every call through all the nodes' addresses, exit 0
// asserted; an agent per machine with the machine's token, SIGKILLed by PID at the end.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runSlipway, slipwayBin, type CliResult, type ProcessCluster } from './process-cluster.js';

export class ClusterCli {
  readonly #cluster: () => ProcessCluster;
  readonly #workers: ChildProcess[] = [];

  /** `cluster` is read at each call: tests make it in before(). */
  constructor(cluster: () => ProcessCluster) {
    this.#cluster = cluster;
  }

  cli(args: readonly string[], servers: readonly string[] = this.#cluster().apiAddrs()): Promise<CliResult> {
    return runSlipway(['--server', servers.join(','), '--timeout', '10000', ...args]);
  }

  /** The command's output; asserts it exited 0. */
  async ok(args: readonly string[], servers?: readonly string[]): Promise<string> {
    const r = await this.cli(args, servers);
    assert.equal(r.code, 0, `slipway ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** A worker agent for the machine, through every node, with the machine's token. */
  async startWorker(id: string): Promise<void> {
    const cluster = this.#cluster();
    const tokenFile = join(cluster.dir, `${id}.token`);
    writeFileSync(tokenFile, (await this.ok(['hardware', 'token', id])).trim());
    mkdirSync(join(cluster.dir, 'journal', id), { recursive: true });
    const log = openSync(join(cluster.dir, `${id}.worker.log`), 'a');
    const args = ['worker', '--id', id, '--server', cluster.apiAddrs().join(','), '--token-file', tokenFile];
    const dirs = ['--journal-dir', join(cluster.dir, 'journal', id), '--work-dir', cluster.dir];
    this.#workers.push(
      spawn(process.execPath, [slipwayBin, ...args, ...dirs], { stdio: ['ignore', log, log] }),
    );
  }

  /** SIGKILLs the agents still running, each by its PID, and waits for them to exit. */
  async stopWorkers(): Promise<void> {
    for (const w of this.#workers) {
      if (w.exitCode !== null || w.signalCode !== null) continue;
      const exited = new Promise<void>((r) => w.once('exit', () => r()));
      w.kill('SIGKILL');
      await exited;
    }
  }
}
