// `npm run bench -- NAME [flags]`: runs one benchmark by name. See bench/README.md.
import { runControlBench } from './control.js';
import { runRaftBench } from './raft.js';
import { runWritePathBench } from './write-path.js';

const benches: Record<string, (argv: readonly string[]) => Promise<void>> = {
  raft: runRaftBench,
  control: runControlBench,
  'write-path': runWritePathBench,
  tftp: async (argv) => (await import('./tftp.js')).runTftpBench(argv),
  dhcp: async (argv) => (await import('./dhcp.js')).runDhcpBench(argv),
  bootos: async (argv) => (await import('./bootos.js')).runBootOsBench(argv),
  storm: async (argv) => (await import('./storm.js')).runStormBench(argv),
  flood: async (argv) => (await import('./flood.js')).runFloodBench(argv),
  cli: async (argv) => (await import('./cli.js')).runCliBench(argv),
  state: async (argv) => (await import('./state.js')).runStateBench(argv),
  'uefi-pxe': async (argv) => (await import('./uefi-pxe.js')).runUefiPxeBench(argv),
  linkcut: async (argv) => (await import('./linkcut.js')).runLinkcutBench(argv),
  quick: async (argv) => (await import('./quick.js')).runQuickBench(argv),
  guard: async (argv) => (await import('./guard.js')).runGuardBench(argv),
  fleet: async (argv) => (await import('./fleet.js')).runFleetBench(argv),
};

const [name, ...rest] = process.argv.slice(2);
const bench = name === undefined ? undefined : benches[name];
if (bench === undefined) {
  process.stderr.write(
    `usage: npm run bench -- NAME [flags]\nbenchmarks: ${Object.keys(benches).join(', ')}\n`,
  );
  process.exitCode = 2;
} else {
  bench(rest).catch((err: unknown) => {
    process.stderr.write(
      `bench ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  });
}
