// The raft driver's chance, as a seam: production draws on crypto, the deterministic simulation
// on its seeded generator, so that a seed replays the same run of the real driver. Its time is
// the Clock of src/platform/clock.ts.
import { randomInt } from 'node:crypto';
import type { Random } from './core/types.js';

/** The randomized election timeouts' source in production. */
export const realRandom: Random = { int: (n) => randomInt(n) };
