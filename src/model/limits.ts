// Bounds on everything the replicated state machine stores, so that one bad or hostile command
// cannot grow a replica's memory without limit. Changing a size limit is a format change:
// every node must agree, because a command one node accepts another must not refuse.

/** A namespace name, in UTF-8 bytes. */
export const namespaceBytesMax = 256;
/** A key, in UTF-8 bytes (etcd's default request limit is far larger; keys here are names). */
export const keyBytesMax = 4096;
/** A value, in bytes. Large artifacts belong on the HTTP boot service, not in the log. */
export const valueBytesMax = 1024 * 1024;
/** An error result's message, in UTF-8 bytes; messages quote keys only in shortened form. */
export const errorMessageBytesMax = 1024;

/** How long a client session lives without a command, in leader-stamped milliseconds. */
export const sessionTtlMsDefault = 10 * 60 * 1000;
/** Live sessions; registering one more evicts the least recently active (dissertation §6.3). */
export const sessionsMaxDefault = 10_000;
/** Cached, unacknowledged results per session; a client that never acknowledges is refused. */
export const sessionResultsMaxDefault = 256;

// ---- the control plane (src/state/control) ----

/** A control command's JSON payload, in UTF-8 bytes: room for a rendered 1,000-action spec. */
export const controlCommandBytesMax = 1024 * 1024;
/**
 * The JSON of a control result. The largest is a workflow: its spec (inside the 1 MiB command
 * that created it) plus up to workflowActionsMax statuses, each at most about 31 KiB once JSON
 * escapes a worst-case output tail (6 bytes per control character). Results on the dispatch path
 * (attempts) are a few hundred bytes; this bound only keeps decodeResult honest.
 */
export const controlResultBytesMax = 40 * 1024 * 1024;
/** Hardware ids, workflow ids, template and token names, in characters ([A-Za-z0-9._:-]). */
export const controlIdLengthMax = 128;
/** Records the control state keeps; one more is refused with E_CONFLICT. */
export const hardwareMax = 100_000;
export const templatesMax = 10_000;
/** Workflows of any state; delete finished ones to make room. */
export const workflowsMax = 100_000;
export const operatorTokensMax = 1_000;
export const interfacesPerHardwareMax = 64;
export const dnsServersPerInterfaceMax = 16;
/** Operator metadata attached to hardware, as JSON, in UTF-8 bytes. */
export const hardwareMetadataBytesMax = 64 * 1024;
/** A custom iPXE script, or a chain URL, in UTF-8 bytes. */
export const ipxeScriptBytesMax = 64 * 1024;
/** A worker token (random, chosen by the proposer), in characters. */
export const workerTokenLengthMax = 256;
/** Template YAML as the operator gave it; the same bound as src/workflow/template-limits.ts. */
export const templateSourceBytesMax = 256 * 1024;
/** A rendered workflow: tasks, and actions across all tasks (as the template limits). */
export const workflowTasksMax = 100;
export const workflowActionsMax = 1_000;
/** Seven days, in seconds: both an action's and a workflow's timeout. */
export const timeoutSMax = 7 * 24 * 3600;
/** Extra attempts an action may ask for after its first fails. */
export const actionRetriesMax = 10;
/** An attempt's message and the tail of its output, as recorded, in UTF-8 bytes. */
export const attemptMessageBytesMax = 1024;
export const attemptOutputTailBytesMax = 4 * 1024;
/** Events kept per workflow: the oldest are dropped beyond this (the global seq stays dense). */
export const workflowEventsMax = 10_000;
/** Retry backoff: base * 2^(n-1) after the nth failed attempt, capped. Deterministic, no jitter. */
export const retryBackoffBaseMs = 1_000;
export const retryBackoffMaxMs = 60_000;

/** An encoded result: a put or delete returning the previous value, or a control result. */
export const resultBytesMax = Math.max(valueBytesMax, controlResultBytesMax) + 1024;

// ---- dynamic DHCP leases (src/state/control/leases.ts) ----

/** Leases kept, bound, expired and declined together; a grant beyond it is refused. */
export const leasesMax = 1_048_576;
/** Grants in one lease.grant command: the DHCP server batches the REQUESTs that arrive together. */
export const leaseGrantsPerCommandMax = 1_024;
/** Longest lease, in seconds (RFC 2131's 0xffffffff "infinite" is refused: leases must end). */
export const leaseTimeSMax = 366 * 24 * 3600;

// ---- power jobs (src/state/control/power-jobs.ts) ----

/** Power jobs kept, of any state; a request beyond it is refused. */
export const powerJobsMax = 100_000;
/** Unfinished jobs queued for one machine: they run one at a time, oldest first. */
export const powerJobsActivePerHardwareMax = 16;
/** Finished jobs kept per machine; a new request drops the oldest beyond this. */
export const powerJobsKeptPerHardware = 20;
/** Steps in one job (netboot, the longest, has three). */
export const powerStepsMax = 8;
/** Attempts per step, lapsed claims included. */
export const powerAttemptsMax = 10;
/** How long a claim may last: long enough for a few BMC round trips, short enough to take over. */
export const powerClaimMsMin = 1_000;
export const powerClaimMsMax = 10 * 60 * 1000;
/** IPMI v2.0 limits: a user name is at most 16 bytes, a password at most 20. */
export const bmcUsernameBytesMax = 16;
export const bmcPasswordBytesMax = 20;

// ---- replicated boot artifacts (src/state/control/artifacts.ts) ----

/** Artifacts registered; one more is refused with E_CONFLICT (a boot catalogue, not a store). */
export const artifactsMax = 1_000;
/** An artifact's name, in characters (one path segment: it is also a URL path segment). */
export const artifactNameLengthMax = 200;
/** An artifact's size: 1 TiB, far above any disk image, well inside a safe integer. */
export const artifactBytesMax = 2 ** 40;

// ---- the audit trail (src/state/control/audit-log.ts) ----

/** Audit entries kept unless the retention setting says otherwise. */
export const auditEntriesDefault = 10_000;
/** The most a retention setting may keep: bounds a replica's memory and its snapshot. */
export const auditEntriesMax = 100_000;
/** The longest age a retention setting may give, in days (0: no age limit). */
export const auditRetentionDaysMax = 3_650;
/** What an audit entry names and says, in UTF-8 bytes (the kind, its target, a refusal's message). */
export const auditTextBytesMax = 1024;

// ---- bounded workflow history (docs/decisions/0020-bounded-state.md) ----

/** Finished workflows kept unless the retention setting says otherwise (the newest by finish). */
export const workflowFinishedMaxDefault = 10_000;
/** Finished workflows are kept this many days unless the retention says otherwise (0: no age limit). */
export const workflowFinishedDaysDefault = 30;
/** The longest age a workflow retention may give, in days. */
export const workflowRetentionDaysMax = 3_650;
/** Workflows one workflow.gc command may name: bounds the command and the work of one apply. */
export const workflowGcBatchMax = 256;
/**
 * Output tails kept across one workflow's events, in UTF-8 bytes (from state version 2): past it,
 * the oldest events' tails are cut first. Action statuses keep each action's last tail besides.
 */
export const workflowOutputTailBytesMax = 1024 * 1024;

// ---- drained members (docs/decisions/0022-node-drain.md) ----

/** Members drained at once: a cluster has a handful of members; this bounds the set and the snapshot. */
export const drainedMembersMax = 64;
/** Members whose API addresses the state records (member-api-addrs.ts): as many as may be drained. */
export const memberApiAddrsMax = drainedMembersMax;

// ---- machine inventory (src/model/inventory.ts) ----
// A report at these bounds is about 256 × 1.3 KiB of disks plus 128 × 0.5 KiB of NICs: well
// inside one control command, so an inventory can travel in a replicated command and snapshot.

/** Disks in one report: a 90-bay JBOD head fits, a runaway list of partitions does not. */
export const inventoryDisksMax = 256;
/** NICs in one report (physical functions only; the collector skips SR-IOV virtual functions). */
export const inventoryNicsMax = 128;
/** Any text in a report (CPU model, disk model, serials, vendor), in UTF-8 bytes. */
export const inventoryTextBytesMax = 256;
/** Logical CPUs, and so cores and sockets (Linux's NR_CPUS tops out at 8192). */
export const inventoryCpuThreadsMax = 16_384;
/** A NIC's speed, in Mb/s: 10 Tb/s, far above any link. */
export const inventoryNicSpeedMbpsMax = 10_000_000;

// ---- selectors (src/fleet/selector.ts) ----
// A pool or workflow keeps its selector's text in the replicated state; these bound it.

/** A selector's text, in UTF-8 bytes. */
export const selectorBytesMax = 4096;
/**
 * Machines one `workflow create --selector` offers the state, each with the template rendered for
 * it: the first of them still ready when the command applies is allocated.
 */
export const allocationCandidatesMax = 8;
/** Machines one workflow's alternate policy may try (`--attempts`), the first included. */
export const alternateAttemptsMax = 16;
/** `--attempts` when the alternate policy is asked for without it. */
export const alternateAttemptsDefault = 3;
/** `--attempts` when the race policy is asked for without it: its two lanes, no further machine. */
export const raceAttemptsDefault = 2;
/** Terms joined by commas in one selector. */
export const selectorTermsMax = 64;
/** Values in one `in (...)` or `notin (...)` list. */
export const selectorValuesMax = 256;

// ---- machine lifecycle (docs/decisions/0028-machine-lifecycle.md) ----

/** Transitions each machine's history keeps; the oldest are dropped beyond it (seqs stay dense). */
export const machineHistoryMax = 32;

/** The most failures a quarantine policy may count (and a machine keeps the stamps of). */
export const quarantineFailuresMax = 16;

/** The longest window a quarantine policy may count failures in: 90 days. */
export const quarantineWindowSMax = 90 * 24 * 3600;
/** A transition's reason, as kept, in UTF-8 bytes: longer ones (a workflow's message) are cut. */
export const lifecycleReasonBytesMax = 512;
/** How long a machine may stay `inspecting` unless the command says otherwise, in seconds. */
export const inspectingTimeoutSDefault = 30 * 60;
/** How long a machine may stay `releasing` unless the command says otherwise, in seconds. */
export const releasingTimeoutSDefault = 30 * 60;
/** The deadline a command may give a transitional state: 1 s to 7 days. */
export const lifecycleTimeoutSMax = 7 * 24 * 3600;
/**
 * `provisioning` ends this long after its workflow's own deadline at the latest: the workflow's
 * timeout comes first, this only catches a workflow that never started (its machine never
 * booted) or a timeout that was never proposed.
 */
export const provisioningGraceMs = 60_000;

// ---- labels (docs/decisions/0028-machine-lifecycle.md) ----

/** Labels on one machine. */
export const labelsPerHardwareMax = 64;

/** Pools in the state (docs/decisions/0035-pools.md): a fleet has a handful; they live in the snapshot's head. */
export const poolsMax = 256;
/** Machines one pool keeps: bounds its members list. */
export const poolSizeMax = 4_096;
