// `node --import tsx bench/flame-graph.ts [--title T] [--min-percent P] IN.cpuprofile OUT.svg`
// A flame graph of a V8 CPU profile (node --cpu-prof, as SLIPWAY_BENCH_PROFILE_DIR writes
// them): the call stacks of the busy samples, callers below their callees, each frame as wide as
// its share of the busy time (idle left out), coloured by area (bench/cpu-profile.ts). Frames
// narrower than --min-percent of the whole (default 0.15) are left out, which keeps the file
// small enough to commit; each frame's name, milliseconds and share are in its tooltip.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { areaOf, shortUrl, type CpuProfile, type ProfileNode } from './cpu-profile.js';

interface Frame {
  readonly name: string;
  readonly area: string;
  /** Microseconds in this frame and everything it called. */
  totalUs: number;
  readonly children: Frame[];
}

const areaColours: Readonly<Record<string, string>> = {
  'grpc-js': '#e8a33d',
  "Node's HTTP/2": '#e07b39',
  "Node's streams, events, buffers, timers, ticks": '#d9c36a',
  'module loading (start-up)': '#c8c8c8',
  'LevelDB (classic-level, abstract-level)': '#7aa6d8',
  'slipway raft': '#5cb85c',
  'slipway api (and generated codecs)': '#8fd18f',
  'slipway state': '#3f9f6f',
  'slipway, other': '#a8d5a8',
  'protobuf-es': '#b58fd6',
  "(program): V8's own work outside JavaScript": '#d9534f',
  '(garbage collector)': '#b03a2e',
  'native functions': '#e6b8a2',
  'other packages': '#9e9e9e',
};

/** The call tree of the busy samples, with each node's total time. */
export function callTree(profile: CpuProfile): Frame {
  const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const rootNode = profile.nodes[0];
  if (rootNode === undefined) throw new Error('the profile has no nodes');
  const build = (node: ProfileNode): Frame | null => {
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') return null;
    const children = (node.children ?? [])
      .map((id) => byId.get(id))
      .filter((c): c is ProfileNode => c !== undefined)
      .map(build)
      .filter((f): f is Frame => f !== null);
    const name =
      functionName.startsWith('(') || url === ''
        ? functionName === ''
          ? '(anonymous native)'
          : functionName
        : `${functionName === '' ? '(anonymous)' : functionName} ${shortUrl(url)}:${String(lineNumber + 1)}`;
    const totalUs = (selfUs.get(node.id) ?? 0) + children.reduce((sum, c) => sum + c.totalUs, 0);
    return { name, area: areaOf(url, functionName), totalUs, children };
  };
  const root = build(rootNode);
  if (root === null) throw new Error('the profile is all idle');
  return { ...root, name: 'all busy samples' };
}

const escapeXml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The SVG of `root`: `width` px wide, frames under `minShare` of the root left out. */
export function flameSvg(root: Frame, title: string, width = 1200, minShare = 0.0015): string {
  const rowPx = 16;
  const top = 40;
  const rects: string[] = [];
  let depthMax = 0;
  const minUs = root.totalUs * minShare;
  const visit = (f: Frame, depth: number, xUs: number): void => {
    depthMax = Math.max(depthMax, depth);
    const x = (xUs / root.totalUs) * width;
    const w = (f.totalUs / root.totalUs) * width;
    rects.push(frameSvg(f, depth, x, w, root.totalUs));
    let childX = xUs;
    for (const c of [...f.children].sort((a, b) => a.name.localeCompare(b.name))) {
      if (c.totalUs >= minUs) visit(c, depth + 1, childX);
      childX += c.totalUs;
    }
  };
  visit(root, 0, 0);
  const legendTop = top + (depthMax + 1) * rowPx + 16;
  const legend = Object.entries(areaColours).map(([area, colour], i) => {
    const x = 10 + (i % 3) * 400;
    const y = legendTop + Math.floor(i / 3) * 18;
    return `<rect x="${x}" y="${y}" width="12" height="12" fill="${colour}"/><text x="${x + 18}" y="${y + 10}">${escapeXml(area)}</text>`;
  });
  const height = legendTop + Math.ceil(legend.length / 3) * 18 + 10;
  // Callers below callees: depth 0 is the bottom row.
  const flip = (svg: string): string =>
    svg.replace(/data-depth="(\d+)" y="0"/g, (_, d: string) => {
      const y = top + (depthMax - Number(d)) * rowPx;
      return `y="${y}"`;
    });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width + 20}" height="${height}" font-family="monospace" font-size="11">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="10" y="22" font-size="14">${escapeXml(title)}</text>`,
    `<g transform="translate(10,0)">`,
    ...rects.map(flip),
    `</g>`,
    ...legend,
    `</svg>`,
    '',
  ].join('\n');
}

function frameSvg(f: Frame, depth: number, x: number, w: number, rootUs: number): string {
  const ms = f.totalUs / 1000;
  const pct = (f.totalUs / rootUs) * 100;
  const tip = `${f.name}: ${ms.toFixed(0)} ms, ${pct.toFixed(1)} %`;
  const colour = depth === 0 ? '#eeeeee' : (areaColours[f.area] ?? '#9e9e9e');
  const chars = Math.floor((w - 4) / 6.6);
  const label = chars < 3 ? '' : f.name.length <= chars ? f.name : `${f.name.slice(0, chars - 2)}..`;
  return (
    `<g><title>${escapeXml(tip)}</title>` +
    `<rect x="${x.toFixed(1)}" data-depth="${depth}" y="0" width="${Math.max(w - 0.5, 0.5).toFixed(1)}" height="15" fill="${colour}"/>` +
    (label === ''
      ? ''
      : `<text x="${(x + 2).toFixed(1)}" data-depth="${depth}" y="0" dy="11">${escapeXml(label)}</text>`) +
    `</g>`
  );
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: { title: { type: 'string' }, 'min-percent': { type: 'string', default: '0.15' } },
    allowPositionals: true,
    strict: true,
  });
  const [input, output] = positionals;
  if (input === undefined || output === undefined || positionals.length !== 2)
    throw new Error(
      'usage: node --import tsx bench/flame-graph.ts [--title T] [--min-percent P] IN.cpuprofile OUT.svg',
    );
  const minPercent = Number(values['min-percent']);
  if (!Number.isFinite(minPercent) || minPercent < 0 || minPercent >= 100)
    throw new Error('--min-percent must be a number from 0 to 100');
  const profile = JSON.parse(readFileSync(input, 'utf8')) as CpuProfile;
  const root = callTree(profile);
  writeFileSync(output, flameSvg(root, values.title ?? input, 1200, minPercent / 100));
  process.stdout.write(`${output}: ${(root.totalUs / 1000).toFixed(0)} ms busy\n`);
}

// A command when run, a library when imported (test/unit/flame-graph.test.ts).
if (process.argv[1] === fileURLToPath(import.meta.url)) main();
