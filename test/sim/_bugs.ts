import { runSeed } from '/work/main/test/sim/simulation.js';
for (const bug of ['ackBeforePersist', 'staleRead', 'tamperApply', 'forgetVote'] as const) {
  const kinds: Record<string, number> = {};
  let first = -1;
  const t0 = performance.now();
  for (let seed = 1; seed <= 200; seed++) {
    const r = runSeed({ seed, bug });
    if (r.violation) {
      kinds[r.violation.kind] = (kinds[r.violation.kind] ?? 0) + 1;
      if (first < 0) first = seed;
    }
  }
  console.log(bug, first, JSON.stringify(kinds), Math.round(performance.now() - t0));
}
