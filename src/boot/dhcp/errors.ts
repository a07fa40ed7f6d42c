// The ways DHCP work can go wrong: a packet off the wire that does not parse, a packet Slipway
// was asked to build that cannot be put on the wire, or settings that make no sense. Each
// carries enough detail to name the problem in a log line without a packet capture.

/** A received packet is malformed. `offset` is the byte in the packet where the problem was found. */
export class DhcpDecodeError extends Error {
  readonly code = 'E_DHCP_MALFORMED';
  readonly offset: number;
  readonly problem: string;

  constructor(offset: number, problem: string) {
    super(`malformed DHCP packet at byte ${offset}: ${problem}`);
    this.name = 'DhcpDecodeError';
    this.offset = offset;
    this.problem = problem;
  }
}

/** A packet to send is invalid or does not fit; `field` names the header field or option at fault. */
export class DhcpEncodeError extends Error {
  readonly code = 'E_DHCP_UNENCODABLE';
  readonly field: string;
  readonly problem: string;

  constructor(field: string, problem: string) {
    super(`cannot encode DHCP packet: ${field}: ${problem}`);
    this.name = 'DhcpEncodeError';
    this.field = field;
    this.problem = problem;
  }
}

/**
 * Slipway's own inputs to a reply (a hardware record's netboot settings, a lease, the server
 * id) are invalid. Unlike a bad packet this is an operator's or a caller's mistake to fix,
 * so it is thrown rather than turned into a silent no-reply.
 */
export class DhcpSettingsError extends Error {
  readonly code = 'E_DHCP_SETTINGS';
  readonly field: string;
  readonly problem: string;

  constructor(field: string, problem: string) {
    super(`invalid DHCP settings: ${field}: ${problem}`);
    this.name = 'DhcpSettingsError';
    this.field = field;
    this.problem = problem;
  }
}
