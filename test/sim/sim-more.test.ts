// Goal: as sim.test.ts, across seeds 501-1000 of the deterministic cluster simulation: the
// production raft driver with LevelLogStore and the real ReplicatedState keeps raft's safety
// invariants and the control plane's (each attempt at most once, a changefeed without gaps or
// duplicates, deadlines only once passed, power steps once each and in order, every workflow
// and power job finished once faults stop), recovers after healing, and gives clients a
// linearizable history.
// Method: each seed is one whole-cluster run on virtual time (test/sim/driver-sim.ts) with
// seeded faults, checked after every event and at the end. This file is sim.test.ts's second
// half, split off so that the two run in parallel.
import { testSeedRange } from './seed-range.js';

testSeedRange(501, 1000);
