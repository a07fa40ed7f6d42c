// Goal: prove that the agent performs a reboot/poweroff/kexec only after the cluster has
// acknowledged the action's result, exactly once, never after a refusal; that an agent
// restarted after the ack (same boot) performs the journaled effect, one restarted in a later
// boot does not, and one restarted before the ack waits for it; and that no other action starts
// while an effect is pending.
// Method: a real Agent against a scripted node (a grpc-js Worker server on 127.0.0.1 whose
// test code decides what to push and when to acknowledge), a recording MachineControl whose
// boot id the test sets, and the agent's real on-disk journal.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { pino } from 'pino';
import {
  WorkerService,
  type Action,
  type AttemptRef,
  type ConnectRequest,
  type ConnectResponse,
} from '../../src/gen/worker.js';
import { Agent } from '../../src/worker/agent.js';
import { ResultJournal } from '../../src/worker/journal.js';
import type { MachineControl, MachineEffect } from '../../src/worker/machine-control.js';
import { waitFor } from '../support/wait.js';

class RecordingMachine implements MachineControl {
  readonly performed: MachineEffect[] = [];
  boot = 'boot-1';

  bootId(): Promise<string> {
    return Promise.resolve(this.boot);
  }

  perform(effect: MachineEffect): Promise<void> {
    this.performed.push(effect);
    return Promise.resolve();
  }
}

/** The node side of the stream, driven by the test. */
class ScriptedNode {
  readonly received: ConnectRequest[] = [];
  #call: ServerDuplexStream<ConnectRequest, ConnectResponse> | undefined;
  readonly server = new Server();
  address = '';

  async start(): Promise<void> {
    this.server.addService(WorkerService, {
      connect: (call: ServerDuplexStream<ConnectRequest, ConnectResponse>) => {
        this.#call = call;
        call.on('data', (msg: ConnectRequest) => this.received.push(msg));
        call.on('error', () => undefined);
      },
    });
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => {
        if (err === null) resolve(bound);
        else reject(err);
      });
    });
    this.address = `127.0.0.1:${port}`;
  }

  async connected(): Promise<void> {
    await waitFor('the agent to say hello', () => this.received.some((m) => m.kind?.$case === 'hello'));
  }

  send(msg: ConnectResponse): void {
    assert.ok(this.#call !== undefined, 'no agent connected');
    this.#call.write(msg);
  }

  push(action: Action): void {
    this.send({ kind: { $case: 'action', value: action } });
  }

  results(ref: AttemptRef): ConnectRequest[] {
    return this.received.filter((m) => m.kind?.$case === 'result' && sameRef(m.kind.value.attempt, ref));
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

function sameRef(a: AttemptRef | undefined, b: AttemptRef): boolean {
  return a?.workflowId === b.workflowId && a.actionIndex === b.actionIndex && a.attempt === b.attempt;
}

function builtinAction(ref: AttemptRef, builtin: string, command: string[] = []): Action {
  return {
    attempt: ref,
    task: 'os',
    name: builtin === '' ? 'step' : builtin,
    image: '',
    command,
    args: [],
    env: {},
    volumes: [],
    timeoutS: 60,
    deadlineMs: 0,
    builtin,
  };
}

const logger = pino({ level: 'silent' });
const dirs: string[] = [];
const agents: Agent[] = [];
let node: ScriptedNode;

function journalDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'slipway-agent-effects-'));
  dirs.push(dir);
  return dir;
}

async function startAgent(dir: string, machine: MachineControl): Promise<Agent> {
  const agent = new Agent({
    workerId: 'hw-1',
    servers: [node.address],
    journalDir: dir,
    logger,
    machineControl: machine,
    resendMs: 60_000,
    reconnectMinMs: 10,
  });
  agents.push(agent);
  await agent.start();
  return agent;
}

before(async () => {
  node = new ScriptedNode();
  await node.start();
});

afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop();
  node.received.length = 0;
});

after(() => {
  node.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('machine effects', () => {
  it('reboots only once the result is acknowledged, and only once', async () => {
    const machine = new RecordingMachine();
    const dir = journalDir();
    await startAgent(dir, machine);
    await node.connected();
    const ref = { workflowId: 'wf-1', actionIndex: 1, attempt: 1 };
    node.push(builtinAction(ref, 'reboot'));
    await waitFor('the result', () => node.results(ref).length > 0);
    const result = node.results(ref)[0]?.kind;
    assert.ok(result?.$case === 'result');
    assert.deepEqual([result.value.success, result.value.message], [true, 'reboot scheduled']);
    // Unacknowledged, the result is journaled with the effect, and nothing has happened.
    const journal = await ResultJournal.open(dir);
    assert.equal(journal.effect()?.effect, 'reboot');
    assert.deepEqual(machine.performed, []);
    // Another action meanwhile is not started: the machine is about to go down.
    const next = { workflowId: 'wf-1', actionIndex: 2, attempt: 1 };
    node.push(builtinAction(next, '', ['true']));
    node.send({ kind: { $case: 'ack', value: { attempt: ref, duplicate: false, committedAtMs: 0 } } });
    node.send({ kind: { $case: 'ack', value: { attempt: ref, duplicate: true, committedAtMs: 0 } } });
    await waitFor('the reboot', () => machine.performed.length > 0);
    await waitFor('the effect forgotten', async () => (await ResultJournal.open(dir)).effect() === undefined);
    assert.deepEqual(machine.performed, ['reboot']);
    assert.equal(node.results(next).length, 0, 'the action pushed meanwhile did not run');
  });

  it('performs nothing when the result is refused', async () => {
    const machine = new RecordingMachine();
    const dir = journalDir();
    await startAgent(dir, machine);
    await node.connected();
    const ref = { workflowId: 'wf-2', actionIndex: 0, attempt: 3 };
    node.push(builtinAction(ref, 'poweroff'));
    await waitFor('the result', () => node.results(ref).length > 0);
    node.send({ kind: { $case: 'refused', value: { attempt: ref, reason: 'stale attempt' } } });
    await waitFor('the effect dropped', async () => (await ResultJournal.open(dir)).effect() === undefined);
    assert.deepEqual(machine.performed, []);
  });

  it('after a restart: performs an acknowledged effect in the same boot, not in a later one; waits for an ack', async () => {
    const ref = { workflowId: 'wf-3', actionIndex: 0, attempt: 1 };
    const result = {
      attempt: ref,
      success: true,
      exitStatus: 0,
      message: 'reboot scheduled',
      outputTail: '',
    };
    const effect = { attempt: ref, effect: 'kexec' as const, bootId: 'boot-1' };

    // Acknowledged, then the agent died before the effect: the same boot performs it.
    const acked = journalDir();
    const ackedJournal = await ResultJournal.open(acked);
    await ackedJournal.addResult(result, effect);
    await ackedJournal.acknowledge(ref);
    const same = new RecordingMachine();
    await startAgent(acked, same);
    assert.deepEqual(same.performed, ['kexec']);
    assert.equal((await ResultJournal.open(acked)).effect(), undefined);

    // The same journal after the machine booted again: it happened; nothing to do.
    const later = journalDir();
    const laterJournal = await ResultJournal.open(later);
    await laterJournal.addResult(result, effect);
    await laterJournal.acknowledge(ref);
    const rebooted = new RecordingMachine();
    rebooted.boot = 'boot-2';
    await startAgent(later, rebooted);
    assert.deepEqual(rebooted.performed, []);
    assert.equal((await ResultJournal.open(later)).effect(), undefined);

    // Not acknowledged yet: the result goes out with the hello, and the ack brings the effect.
    for (const agent of agents.splice(0)) await agent.stop();
    node.received.length = 0;
    const waiting = journalDir();
    await (await ResultJournal.open(waiting)).addResult(result, effect);
    const machine = new RecordingMachine();
    await startAgent(waiting, machine);
    await node.connected();
    const hello = node.received.find((m) => m.kind?.$case === 'hello')?.kind;
    assert.ok(hello?.$case === 'hello');
    assert.deepEqual(
      hello.value.pendingResults.map((r) => r.attempt),
      [ref],
    );
    assert.deepEqual(machine.performed, []);
    node.send({ kind: { $case: 'ack', value: { attempt: ref, duplicate: false, committedAtMs: 0 } } });
    await waitFor('the kexec', () => machine.performed.length > 0);
    assert.deepEqual(machine.performed, ['kexec']);
  });

  it('a failed built-in asks for no effect', async () => {
    const machine = new RecordingMachine();
    const dir = journalDir();
    await startAgent(dir, machine);
    await node.connected();
    const ref = { workflowId: 'wf-4', actionIndex: 0, attempt: 1 };
    node.push(builtinAction(ref, 'kexec'));
    await waitFor('the result', () => node.results(ref).length > 0);
    const result = node.results(ref)[0]?.kind;
    assert.ok(result?.$case === 'result');
    assert.equal(result.value.success, false);
    assert.match(result.value.message, /^kexec: BLOCK_DEVICE is not set/);
    assert.equal((await ResultJournal.open(dir)).effect(), undefined);
    const unknown = { workflowId: 'wf-4', actionIndex: 1, attempt: 1 };
    node.push(builtinAction(unknown, 'format-disk'));
    await waitFor('the second result', () => node.results(unknown).length > 0);
    const refused = node.results(unknown)[0]?.kind;
    assert.ok(refused?.$case === 'result');
    assert.deepEqual(
      [refused.value.exitStatus, refused.value.message],
      [127, 'this agent has no built-in action "format-disk"; upgrade it'],
    );
  });
});
