// How the garbage collector of a server process sizes its heap. V8 lets the old generation grow
// to up to about four times the live data before its next full collection when the mutator runs
// fast, as a node does while it applies a long log (a follower catching up, a restart replaying):
// the `state` benchmark's node reached 605 MB of RSS with 90 MB live. Growing by half instead keeps
// RSS close to what the state holds (about 400 MB there) for a few more, short, full collections,
// which the benchmark does not see in its build time or event-loop delay (bench/README.md).
import { setFlagsFromString } from 'node:v8';

/** The old generation's growth after a full collection, in percent of the live data. */
export const serverHeapGrowingPercent = 50;

/** Applies the server's heap sizing to this process; V8 reads it at every collection. */
export function applyServerHeapProfile(): void {
  setFlagsFromString(`--heap-growing-percent=${serverHeapGrowingPercent}`);
}
