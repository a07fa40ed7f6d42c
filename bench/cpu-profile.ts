// A V8 CPU profile as `node --cpu-prof` writes it, and the areas its scripts fall in (grpc-js,
// Node's HTTP/2, LevelDB, slipway's raft, ...): shared by bench/profile-top.ts and
// bench/flame-graph.ts.
export interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

/** A short place for a script URL: the part from dist/, node_modules/ or node: on. */
export function shortUrl(url: string): string {
  if (url === '') return '(native)';
  const at = ['node_modules/', 'dist/', 'node:'].map((k) => url.lastIndexOf(k)).find((i) => i >= 0);
  return at === undefined ? url : url.slice(at);
}

/** The areas a script URL falls in, first match wins. */
const areas: readonly (readonly [string, RegExp])[] = [
  ['grpc-js', /@grpc\/grpc-js\//],
  ["Node's HTTP/2", /^node:(internal\/)?http2/],
  ['LevelDB (classic-level, abstract-level)', /(classic|abstract)-level\//],
  ['module loading (start-up)', /^node:internal\/modules\//],
  ["Node's streams, events, buffers, timers, ticks", /^node:/],
  ['slipway raft', /dist\/src\/raft\//],
  ['slipway api (and generated codecs)', /dist\/src\/(api|gen)\//],
  ['slipway state', /dist\/src\/state\//],
  ['slipway, other', /dist\/(src|lb)\//],
  ['protobuf-es', /@bufbuild\/protobuf/],
];

export function areaOf(url: string, functionName: string): string {
  if (functionName === '(program)') return "(program): V8's own work outside JavaScript";
  if (functionName === '(garbage collector)') return '(garbage collector)';
  if (url === '') return 'native functions';
  return areas.find(([, re]) => re.test(url))?.[0] ?? 'other packages';
}
