// Goal: the raft core keeps every safety invariant (election safety, no double vote, log
// matching, identical committed prefixes, leader completeness, state machine safety, no lost
// committed entry), recovers after the network heals, and gives clients a linearizable
// history, across seeds 1501-3000 of the deterministic cluster simulation.
// Method: each seed is one whole-cluster run on virtual time (test/sim/simulation.ts) with
// seeded network, disk, crash, pause and membership faults; the Monitor checks after every
// event and the linearizability checker judges the history at the end. A failure lists each
// failing seed with the command that replays it exactly. This file is sim.test.ts's second
// half, split off so that the two run in parallel.
import { testSeedRange } from './seed-range.js';

testSeedRange(1501, 3000);
