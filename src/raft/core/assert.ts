// Programmer errors and broken invariants crash the process (TigerBeetle style): a node with
// a violated invariant must not keep acting; the supervisor restarts it and Raft stays safe.
export default function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`raft invariant violated: ${message}`);
}
