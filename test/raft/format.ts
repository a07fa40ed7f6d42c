// Text forms of the core's values for scenario output: one line per message or entry list,
// fields named as in types.ts, zero-valued fields left out where the type does not use them.
import { decodeConfChange } from '../../src/raft/core/membership.js';
import type {
  ConfChange,
  Entry,
  HardState,
  Membership,
  Message,
  SnapshotMeta,
  SoftState,
} from '../../src/raft/core/types.js';

const decoder = new TextDecoder();

function ids(members: readonly { readonly id: string }[]): string {
  return members.map((m) => m.id).join(',');
}

export function fmtConfChange(cc: ConfChange): string {
  return cc.type === 'bootstrap' ? `conf:bootstrap(${ids(cc.voters)})` : `conf:${cc.type}(${cc.member.id})`;
}

export function fmtEntry(e: Entry): string {
  const head = `${e.term}/${e.index}`;
  switch (e.type) {
    case 'noop':
      return `${head} noop`;
    case 'normal':
      return `${head} ${JSON.stringify(decoder.decode(e.data))}`;
    case 'conf':
      return `${head} ${fmtConfChange(decodeConfChange(e.data))}`;
  }
}

export function fmtEntries(entries: readonly Entry[]): string {
  return entries.map(fmtEntry).join(', ');
}

export function fmtMembership(m: Membership): string {
  return `voters=(${ids(m.voters)}) learners=(${ids(m.learners)})`;
}

export function fmtSnapshot(s: SnapshotMeta): string {
  return `index=${s.index} term=${s.term} ${fmtMembership(s.membership)}`;
}

export function fmtHardState(hs: HardState): string {
  return `term=${hs.term} vote=${hs.vote === '' ? '-' : hs.vote} commit=${hs.commit}`;
}

function roleName(s: SoftState): string {
  return s.role === 'preCandidate' ? 'pre-candidate' : s.role;
}

/** A role change, as printed when it happens. */
export function fmtSoftState(id: string, s: SoftState): string {
  return `${id} became ${roleName(s)} at term ${s.term}`;
}

export function fmtSoftStateFields(s: SoftState): string {
  return `${roleName(s)} term=${s.term} leader=${s.leader === '' ? '-' : s.leader}`;
}

export function fmtMessage(m: Message): string {
  const parts = [`${m.from}->${m.to} ${m.type} term=${m.term}`];
  switch (m.type) {
    case 'app':
      parts.push(
        `index=${m.index} logTerm=${m.logTerm} commit=${m.commit} entries=[${fmtEntries(m.entries)}]`,
      );
      break;
    case 'appResp':
      parts.push(`index=${m.index}`);
      if (m.reject) parts.push(`reject hint=${m.rejectHint} hintTerm=${m.logTerm}`);
      break;
    case 'vote':
    case 'preVote':
      parts.push(`index=${m.index} logTerm=${m.logTerm}`);
      if (m.transfer) parts.push('transfer');
      break;
    case 'voteResp':
    case 'preVoteResp':
      if (m.reject) parts.push('reject');
      break;
    case 'heartbeat':
      parts.push(`commit=${m.commit}`);
      if (m.context !== 0) parts.push(`round=${m.context}`);
      break;
    case 'heartbeatResp':
      if (m.context !== 0) parts.push(`round=${m.context}`);
      break;
    case 'snap':
      parts.push(m.snapshot === null ? 'snapshot=null' : `snapshot=[${fmtSnapshot(m.snapshot)}]`);
      break;
    case 'timeoutNow':
      break;
    case 'readIndex':
      parts.push(`req=${m.context}`);
      break;
    case 'readIndexResp':
      parts.push(`req=${m.context}`);
      if (m.reject) parts.push('reject');
      else parts.push(`index=${m.index}`);
      break;
  }
  return parts.join(' ');
}
