// `HardwareHistory`: a machine's lifecycle transitions (docs/decisions/0028-machine-lifecycle.md),
// the kept ones from the replicated state, then, with follow, each new one as it is applied. As
// for workflow events, the stream subscribes before it reads the backlog and the per-machine seq
// makes the join exact: nothing is missed or sent twice.
import { status } from '@grpc/grpc-js';
import type { handleServerStreamingCall, ServerWritableStream } from '@grpc/grpc-js';
import type { HardwareHistoryRequest, HardwareHistoryResponse } from '../gen/control.js';
import type { ControlState } from '../state/control/control-state.js';
import type { MachineEvent } from '../model/machine-lifecycle.js';
import type { Authenticator } from './auth.js';
import { machineEventRecord } from './control-messages.js';
import { ApiError, toServiceError } from './errors.js';
import type { MachineEventHub } from './event-hub.js';

export interface HistoryContext {
  readonly control: ControlState;
  readonly auth: Authenticator;
  readonly machines: MachineEventHub;
  /** Waits until this node has applied everything committed before the call (ReadIndex). */
  readonly catchUp: () => Promise<void>;
}

/** The kept history is small (machineHistoryMax): one read gives all of it. */
const backlogMax = 1000;

type Call = ServerWritableStream<HardwareHistoryRequest, HardwareHistoryResponse>;

export function hardwareHistoryHandler(
  ctx: HistoryContext,
): handleServerStreamingCall<HardwareHistoryRequest, HardwareHistoryResponse> {
  return (call: Call) => {
    const req = call.request;
    const id = req.id;
    let next = Math.max(req.fromSeq, 0);
    let unsubscribe: (() => void) | undefined;
    let done = false;
    /** Live events that arrive before the backlog is sent; undefined once it is. */
    let queued: (MachineEvent | 'deleted')[] | undefined = [];
    const finish = (err?: unknown): void => {
      if (done) return;
      done = true;
      unsubscribe?.();
      if (err === undefined) call.end();
      else call.emit('error', toServiceError(err));
    };
    const send = (e: MachineEvent | 'deleted'): void => {
      if (done) return;
      if (e === 'deleted') {
        finish();
        return;
      }
      if (e.seq < next) return;
      next = e.seq + 1;
      call.write({ event: machineEventRecord(id, e) });
    };
    call.on('cancelled', () => {
      done = true;
      unsubscribe?.();
    });
    const run = async (): Promise<void> => {
      await ctx.auth.operator(call, 'viewer');
      if (id === '') throw new ApiError(status.INVALID_ARGUMENT, 'the hardware id is required');
      if (req.follow) {
        unsubscribe = ctx.machines.subscribe(id, (e) => {
          if (queued === undefined) send(e);
          else queued.push(e);
        });
      }
      await ctx.catchUp();
      const hw = ctx.control.hardware(id);
      if (hw === undefined) throw new ApiError(status.NOT_FOUND, `hardware "${id}" not found`);
      if (hw.lifecycle === undefined) {
        throw new ApiError(
          status.FAILED_PRECONDITION,
          'machines have a lifecycle from cluster state version 3; finish the rolling upgrade (`slipway cluster version`)',
        );
      }
      const backlog = ctx.control.machineHistory(id, next, backlogMax);
      for (const e of backlog) send(e);
      const live = queued ?? [];
      queued = undefined;
      for (const e of live) send(e);
      if (!req.follow) finish();
    };
    run().catch((err: unknown) => finish(err));
  };
}
