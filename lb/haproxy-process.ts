// Runs HAProxy with a configuration from lb/haproxy.ts: finds the binary, writes and checks the
// file (`haproxy -c`), starts it in the foreground (`-db`: one process, no master, so its PID is
// the one to stop), waits until it accepts connections, and stops it by PID.
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BalancerSpec } from '../src/model/balancer-spec.js';
import { hostPortOf } from '../src/model/balancer-spec.js';
import { renderHaproxyConfig } from './haproxy.js';
import { findExecutable } from '../src/platform/executable.js';
import { isRunningAs, stopRecordedProcess } from '../src/platform/recorded-process.js';

const readyTimeoutMsDefault = 10_000;
const stopGraceMs = 5000;
const pollMs = 50;

/** The haproxy executable on PATH, else Debian's /usr/sbin/haproxy; undefined when neither exists. */
export function findHaproxy(path = process.env['PATH'] ?? ''): string | undefined {
  return findExecutable('haproxy', ['/usr/sbin/haproxy'], path);
}

/** HAProxy refused its configuration or did not come up; the message carries its own words. */
export class HaproxyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HaproxyError';
  }
}

/** Runs `haproxy -c -f FILE`; throws HaproxyError with HAProxy's output when the file is refused. */
export function checkHaproxyConfig(bin: string, configFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(bin, ['-c', '-f', configFile], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err === null) return resolve();
      // Its alerts and warnings name the file and line; the version banner says nothing.
      const complaints = `${stdout}${stderr}`
        .split('\n')
        .filter((l) => l.trim() !== '' && !l.startsWith('[NOTICE]'));
      reject(new HaproxyError(`haproxy -c refused ${configFile}:\n${complaints.join('\n')}`));
    });
  });
}

export interface HaproxyStart {
  readonly bin: string;
  readonly spec: BalancerSpec;
  /** Where haproxy.cfg and haproxy.log are written. */
  readonly dir: string;
  /** Outlive this process (`cluster up` without --foreground), in a process group of its own. */
  readonly detached: boolean;
  readonly readyTimeoutMs?: number;
}

export interface RunningHaproxy {
  readonly pid: number;
  readonly listenAddr: string;
  readonly configFile: string;
  readonly logFile: string;
}

/**
 * Writes, checks and starts the configuration; resolves once the frontend accepts connections
 * (and the runtime socket, when configured, is there).
 * Throws HaproxyError when the file is refused, the address is taken, or HAProxy exits early.
 */
export async function startHaproxy(o: HaproxyStart): Promise<RunningHaproxy> {
  const configFile = join(o.dir, 'haproxy.cfg');
  const logFile = join(o.dir, 'haproxy.log');
  writeFileSync(configFile, renderHaproxyConfig(o.spec));
  await checkHaproxyConfig(o.bin, configFile);
  const listen = hostPortOf('listenAddr', o.spec.listenAddr);
  // Something already answering there would pass for HAProxy being up.
  if (await accepts(listen.host, listen.port)) {
    throw new HaproxyError(`${o.spec.listenAddr} is already in use; pick another address for the balancer`);
  }
  const log = openSync(logFile, 'a');
  const child = spawn(o.bin, ['-db', '-f', configFile], {
    stdio: ['ignore', log, log],
    detached: o.detached,
  });
  closeSync(log);
  let ended: string | undefined;
  child.once('error', (err) => (ended = `could not run: ${err.message}`));
  child.once('exit', (code, signal) => (ended = `exited (${signal ?? `code ${code}`})`));
  if (o.detached) child.unref();
  const deadline = Date.now() + (o.readyTimeoutMs ?? readyTimeoutMsDefault);
  // Up means the frontend accepts and, when configured, the runtime socket is there: HAProxy
  // binds it after the frontend, and a follower started at once found none.
  const socket = o.spec.runtimeSocket;
  const ready = async (): Promise<boolean> =>
    ended === undefined &&
    (socket === undefined || existsSync(socket)) &&
    (await accepts(listen.host, listen.port));
  while (!(await ready())) {
    if (ended !== undefined || Date.now() > deadline) {
      if (ended === undefined) child.kill('SIGKILL');
      const what = socket === undefined ? '' : ` and open its runtime socket ${socket}`;
      const why = ended ?? `did not accept connections on ${o.spec.listenAddr}${what} in time`;
      throw new HaproxyError(`haproxy ${why}; the end of ${logFile}:\n${tail(logFile)}`);
    }
    await sleep(pollMs);
  }
  return { pid: child.pid!, listenAddr: o.spec.listenAddr, configFile, logFile };
}

/**
 * SIGTERM (in -db mode an immediate stop: a graceful one would wait for hour-long streams),
 * then SIGKILL if it is still there after 5 s. Only a process that is HAProxy running
 * `configFile` is signalled, so a PID reused since it was recorded is left alone. Resolves to
 * whether one was running.
 */
export function stopHaproxy(pid: number, configFile: string): Promise<boolean> {
  return stopRecordedProcess(pid, haproxyOn(configFile), stopGraceMs);
}

/** Whether `pid` is a live HAProxy on this configuration. */
export function isHaproxyRunning(pid: number, configFile: string): boolean {
  return isRunningAs(pid, haproxyOn(configFile));
}

function haproxyOn(configFile: string): (argv: readonly string[]) => boolean {
  return (argv) => argv.some((a) => a.endsWith('haproxy')) && argv.includes(configFile);
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: host.replace(/^\[|\]$/g, ''), port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-20).join('\n');
  } catch {
    return '(no log)';
  }
}
