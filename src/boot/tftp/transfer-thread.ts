// The entry point of a transfer worker thread: one TransferTable behind the message port.
// Started by thread-pool-runner.ts with a TransferThreadConfig as workerData. It does no logging of
// its own; everything it has to say goes back as TransferEvents, and an uncaught exception ends
// the thread, which the server reports and replaces.
import { parentPort, workerData } from 'node:worker_threads';
import { TransferTable } from './transfer-table.js';
import type { TransferCommand, TransferEvent, TransferThreadConfig } from './transfer-protocol.js';

const port = parentPort;
if (port === null) throw new Error('transfer-thread.ts runs only as a worker thread');
const table = new TransferTable(workerData as TransferThreadConfig, (event: TransferEvent) =>
  port.postMessage(event),
);
// The only sender is the server that started this thread, so the shape is trusted.
port.on('message', (command: TransferCommand) => table.handle(command));
port.postMessage({ type: 'ready' } satisfies TransferEvent);
