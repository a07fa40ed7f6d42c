// The simulation's replicated state machine: a map of string registers with put, cas and
// delete, deterministic, with snapshot and restore so that log compaction and snapshot
// install are exercised. Commands are JSON in the entry data; each carries the id of the
// client attempt that proposed it, so a proposer can tell its own entry from another.

export type KvCommand =
  | { readonly op: 'put'; readonly id: string; readonly key: string; readonly value: string }
  | {
      readonly op: 'cas';
      readonly id: string;
      readonly key: string;
      /** null expects the key to be absent. */
      readonly expected: string | null;
      readonly value: string;
    }
  | { readonly op: 'delete'; readonly id: string; readonly key: string };

export type KvResult = { readonly ok: boolean } | { readonly found: boolean };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeCommand(cmd: KvCommand): Uint8Array {
  return encoder.encode(JSON.stringify(cmd));
}

export function decodeCommand(data: Uint8Array): KvCommand {
  const v = JSON.parse(decoder.decode(data)) as Record<string, unknown>;
  const { op, id, key } = v;
  if (typeof id !== 'string' || typeof key !== 'string')
    throw new Error(`malformed command ${JSON.stringify(v)}`);
  if (op === 'put' && typeof v['value'] === 'string') return { op, id, key, value: v['value'] };
  if (op === 'delete') return { op, id, key };
  const expected = v['expected'];
  if (op === 'cas' && typeof v['value'] === 'string' && (expected === null || typeof expected === 'string'))
    return { op, id, key, expected, value: v['value'] };
  throw new Error(`malformed command ${JSON.stringify(v)}`);
}

/** FNV-1a over bytes, seeded so that callers can chain fields. */
export function fnv1a(bytes: Uint8Array, seed = 0x811c9dc5): number {
  let h = seed;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class KvMachine {
  /** The index of the last entry applied or restored. */
  applied = 0;
  private map = new Map<string, string>();

  get(key: string): string | undefined {
    return this.map.get(key);
  }

  /** Applies a committed command at index; raft's own entries use skip(). */
  apply(index: number, cmd: KvCommand): KvResult {
    this.advanceTo(index);
    const current = this.map.get(cmd.key);
    switch (cmd.op) {
      case 'put':
        this.map.set(cmd.key, cmd.value);
        return { ok: true };
      case 'cas': {
        const ok = current === (cmd.expected ?? undefined);
        if (ok) this.map.set(cmd.key, cmd.value);
        return { ok };
      }
      case 'delete':
        this.map.delete(cmd.key);
        return { found: current !== undefined };
    }
  }

  /** A no-op or configuration entry: only the applied index moves. */
  skip(index: number): void {
    this.advanceTo(index);
  }

  snapshot(): Uint8Array {
    const kv = [...this.map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return encoder.encode(JSON.stringify({ applied: this.applied, kv }));
  }

  restore(data: Uint8Array): void {
    if (data.length === 0) {
      this.applied = 0;
      this.map = new Map();
      return;
    }
    const v = JSON.parse(decoder.decode(data)) as { applied: number; kv: [string, string][] };
    this.applied = v.applied;
    this.map = new Map(v.kv);
  }

  /** A digest of the whole state, equal on replicas that applied the same log. */
  digest(): number {
    return fnv1a(this.snapshot());
  }

  private advanceTo(index: number): void {
    if (index !== this.applied + 1)
      throw new Error(`state machine applies index ${index} after ${this.applied}: out of order`);
    this.applied = index;
  }
}
