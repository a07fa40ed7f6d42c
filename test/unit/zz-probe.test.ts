import { checkLinearizable, type Op } from '../support/linearizability.js';
function gen(n: number, unknownRate: number, values: number): Op[] {
  let seed = 12_345;
  const random = (): number => { seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0; return seed / 2 ** 32; };
  const reg = new Map<string, string>();
  const free = new Map<number, number>();
  const placed: { op: Op; point: number; unknown: boolean; took: boolean }[] = [];
  for (let i = 0; i < n; i++) {
    const client = Math.floor(random() * 5);
    const call = (free.get(client) ?? 0) + Math.floor(random() * 10) + 1;
    const ret = call + 1 + Math.floor(random() * 20);
    free.set(client, ret);
    const kind = (['put', 'get', 'get', 'cas', 'delete'] as const)[Math.floor(random() * 5)]!;
    const value = `v${Math.floor(random() * values)}`;
    const expected = random() < 0.2 ? undefined : `v${Math.floor(random() * values)}`;
    placed.push({ op: { client, key: 'k', kind, call, ret, input: kind === 'put' ? { value } : kind === 'cas' ? { expected, value } : undefined, output: undefined } as unknown as Op, point: call + random() * (ret - call), unknown: random() < unknownRate, took: random() < 0.5 });
  }
  const out: Op[] = [];
  for (const p of [...placed].sort((a, b) => a.point - b.point)) {
    const op = p.op as any; const skip = p.unknown && !p.took;
    if (op.kind === 'put') { if (!skip) reg.set('k', op.input.value); op.output = { ok: true }; }
    else if (op.kind === 'get') op.output = { value: reg.get('k') };
    else if (op.kind === 'cas') { const ok = !skip && reg.get('k') === op.input.expected; if (ok) reg.set('k', op.input.value); op.output = { ok }; }
    else { const found = !skip && reg.delete('k'); op.output = { found }; }
    if (p.unknown) { op.output = undefined; op.ret = Infinity; }
  }
  return placed.map((p) => p.op);
}
for (const [n, u, v] of [[500, 0, 50], [2000, 0, 50], [4000, 0, 50], [500, 0.01, 50], [1000, 0.01, 50], [2000, 0.01, 50]] as const) {
  const h = gen(n, u, v); const t = performance.now(); const r = checkLinearizable(h); console.log(n, u, v, r.ok, (performance.now() - t).toFixed(1), 'ms');
}
for (const [n, u] of [[1600, 0.01], [2000, 0.01], [4000, 0.01], [4000, 0.03]] as const) {
  const h = gen(n, u, 50);
  const i = h.findIndex((op, j) => j > n * 0.75 && op.kind === 'get' && op.output !== undefined);
  const broken = h.map((op, j) => (j === i ? { ...op, output: { value: 'never' } } : op)) as Op[];
  const t = performance.now(); const r = checkLinearizable(broken); console.log('broken', n, u, r.ok, (performance.now() - t).toFixed(1), 'ms', h.filter(o=>o.output===undefined).length, 'unknown');
}
