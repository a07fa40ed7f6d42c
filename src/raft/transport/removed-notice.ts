// How a member tells a node that it was removed from the cluster: it ends the raft stream that
// node opened with this status. A removed node that never applied its own removal (the leader
// stops sending to it once the removal applies) learns it this way instead of campaigning for
// ever; etcd's peers answer such a node the same way (HTTP 410 on its raft messages).
import { status } from '@grpc/grpc-js';
import type { NodeId } from '../core/types.js';

export const removedNoticeCode = status.FAILED_PRECONDITION;

/** The status details: who says so and whom it removed. */
export function removedNoticeDetails(self: NodeId, removed: NodeId): string {
  return `member ${self} applied the removal of ${removed} from the cluster`;
}

/** Whether a stream's end status is that notice. */
export function isRemovedNotice(code: number, details: string): boolean {
  const expected: number = removedNoticeCode;
  return code === expected && / applied the removal of \S+ from the cluster$/.test(details);
}
