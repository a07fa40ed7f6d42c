// Goal: bench/flame-graph.ts draws what the profile holds: each frame as wide as its own and its
// callees' busy time, idle left out, narrow frames dropped, names escaped for SVG.
// Method: a small hand-made V8 CPU profile with known sample times.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { callTree, flameSvg } from '../../bench/flame-graph.js';
import type { CpuProfile } from '../../bench/cpu-profile.js';

const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0 });

// root -> (idle) 10 ms; root -> (program) 2 ms; root -> a <x> 3 ms self -> b 1 ms; a -> tiny 0.001 ms.
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 3, 4] },
    { id: 2, callFrame: frame('(idle)') },
    { id: 3, callFrame: frame('(program)') },
    { id: 4, callFrame: frame('a<x>', 'file:///w/dist/src/raft/node.js'), children: [5, 6] },
    { id: 5, callFrame: frame('b', 'file:///w/node_modules/@grpc/grpc-js/build/src/call.js') },
    { id: 6, callFrame: frame('tiny', 'node:events') },
  ],
  samples: [2, 3, 4, 5, 6],
  timeDeltas: [10_000, 2_000, 3_000, 1_000, 1],
  startTime: 0,
  endTime: 16_001,
};

describe('flame graphs', () => {
  it('totals each frame over its callees and leaves idle out', () => {
    const root = callTree(profile);
    assert.equal(root.totalUs, 6_001);
    assert.deepEqual(
      root.children.map((c) => [c.name, c.totalUs, c.area]),
      [
        ['(program)', 2_000, "(program): V8's own work outside JavaScript"],
        ['a<x> dist/src/raft/node.js:1', 4_001, 'slipway raft'],
      ],
    );
    const b = root.children[1]?.children[0];
    assert.equal(b?.name, 'b node_modules/@grpc/grpc-js/build/src/call.js:1');
    assert.equal(b?.area, 'grpc-js');
  });

  it('draws frames to scale, escapes names and drops frames under the minimum', () => {
    const svg = flameSvg(callTree(profile), 'a & b', 600, 0.01);
    assert.match(svg, /<text x="10" y="22" font-size="14">a &amp; b<\/text>/);
    // a<x> is 4,001 of 6,001 microseconds: two thirds of 600 px.
    assert.match(
      svg,
      /<title>a&lt;x&gt; dist\/src\/raft\/node\.js:1: 4 ms, 66\.7 %<\/title><rect x="200\.0" y="\d+" width="399\.5"/,
    );
    assert.doesNotMatch(svg, /tiny/, 'a frame under 1 % is left out');
    assert.equal(svg.match(/<rect /g)?.length, 1 + 4 + 14, 'background, four frames, the legend');
  });
});
