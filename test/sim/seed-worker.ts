// Runs a range of simulation seeds on a worker thread and posts the summary back. The seeds run
// here rather than inside the node:test function, whose async-context tracking of every promise
// made the promise-heavy simulation cost about three times the CPU.
import { parentPort, workerData } from 'node:worker_threads';
import { runSeeds } from './run.js';

const { start, count } = workerData as { start: number; count: number };
parentPort?.postMessage(await runSeeds(start, count));
