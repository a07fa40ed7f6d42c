// Membership bookkeeping: the conf-change codec, validation and application. Pure.
import type { ConfChange, Member, Membership, NodeId } from './types.js';
import { RaftError } from './types.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const emptyMembership: Membership = { voters: [], learners: [] };

export function encodeConfChange(cc: ConfChange): Uint8Array {
  if (cc.type === 'bootstrap' || cc.context === undefined) return encoder.encode(JSON.stringify(cc));
  // The context as base64 last: a change without one keeps the bytes it always had.
  return encoder.encode(JSON.stringify({ type: cc.type, member: cc.member, context: toBase64(cc.context) }));
}

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function isMember(v: unknown): v is Member {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as Record<string, unknown>;
  return typeof m['id'] === 'string' && typeof m['addr'] === 'string' && typeof m['apiAddr'] === 'string';
}

/** Decodes a conf entry. Conf entries are written only by leaders, so garbage is a bug. */
export function decodeConfChange(data: Uint8Array): ConfChange {
  const v = JSON.parse(decoder.decode(data)) as Record<string, unknown>;
  const type = v['type'];
  if (type === 'bootstrap' && Array.isArray(v['voters']) && v['voters'].every(isMember)) {
    return { type, voters: v['voters'] };
  }
  if ((type === 'addLearner' || type === 'promote' || type === 'remove') && isMember(v['member'])) {
    const context = v['context'];
    if (context === undefined) return { type, member: v['member'] };
    if (typeof context === 'string') return { type, member: v['member'], context: fromBase64(context) };
  }
  throw new Error(`malformed conf change entry: ${JSON.stringify(v)}`);
}

export function isVoter(m: Membership, id: NodeId): boolean {
  return m.voters.some((v) => v.id === id);
}

export function isLearner(m: Membership, id: NodeId): boolean {
  return m.learners.some((v) => v.id === id);
}

export function allMembers(m: Membership): Member[] {
  return [...m.voters, ...m.learners];
}

/** Refuses changes that make no sense against the current membership, before proposing. */
export function validateConfChange(m: Membership, cc: ConfChange): void {
  if (cc.type === 'bootstrap')
    throw new RaftError('E_BAD_REQUEST', 'bootstrap is written only at cluster creation');
  const id = cc.member.id;
  switch (cc.type) {
    case 'addLearner':
      if (isVoter(m, id) || isLearner(m, id))
        throw new RaftError('E_BAD_REQUEST', `member ${id} already exists`);
      if (allMembers(m).some((x) => x.addr === cc.member.addr))
        throw new RaftError(
          'E_BAD_REQUEST',
          `raft address ${cc.member.addr} is already used by another member`,
        );
      return;
    case 'promote':
      if (!isLearner(m, id)) throw new RaftError('E_UNKNOWN_MEMBER', `member ${id} is not a learner`);
      return;
    case 'remove':
      if (!isVoter(m, id) && !isLearner(m, id)) throw new RaftError('E_UNKNOWN_MEMBER', `no member ${id}`);
      if (isVoter(m, id) && m.voters.length === 1)
        throw new RaftError('E_BAD_REQUEST', `member ${id} is the last voter and cannot be removed`);
      return;
  }
}

export function applyConfChange(m: Membership, cc: ConfChange): Membership {
  switch (cc.type) {
    case 'bootstrap':
      return { voters: [...cc.voters], learners: [] };
    case 'addLearner':
      if (isVoter(m, cc.member.id) || isLearner(m, cc.member.id)) return m;
      return { voters: m.voters, learners: [...m.learners, cc.member] };
    case 'promote': {
      const learner = m.learners.find((x) => x.id === cc.member.id);
      if (learner === undefined) return m;
      return { voters: [...m.voters, learner], learners: m.learners.filter((x) => x.id !== cc.member.id) };
    }
    case 'remove':
      return {
        voters: m.voters.filter((x) => x.id !== cc.member.id),
        learners: m.learners.filter((x) => x.id !== cc.member.id),
      };
  }
}
