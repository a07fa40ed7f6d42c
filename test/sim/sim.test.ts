// Goal: the production raft driver (RaftNode with LevelLogStore over a simulated disk and the
// real ReplicatedState) keeps every safety invariant (election safety, no double vote, log
// matching, identical committed prefixes, leader completeness, state machine safety, no lost
// committed entry), runs each action attempt at most once with a changefeed that has no gap and
// no duplicate, recovers after the network heals, and gives clients a linearizable history,
// across seeds 1-500 of the deterministic cluster simulation; and that the production deadline
// scanner and power executor, run by whichever server leads, time an attempt out only once its
// deadline passed, begin a power job's steps once per claimed attempt and in order on BMCs that
// fail and hang, and finish every workflow and power job once faults stop; and, in the seeds that
// run a machine by a simulated agent over the worker stream to the production WorkerService,
// that the agent executes each attempt at most once and every result acknowledged to it is
// recorded.
// Method: each seed is one whole-cluster run on virtual time (test/sim/driver-sim.ts) with
// seeded network, disk (power loss, torn tails), crash, pause, leadership and membership faults;
// the monitors check after every event and the linearizability checker judges the history at
// the end. A failure lists each failing seed with the command that replays it exactly.
// sim-more.test.ts runs 501-1000 in parallel with this file: the 1,000 seeds a run of the suite
// checks.
import { testSeedRange } from './seed-range.js';

testSeedRange(1, 500);
