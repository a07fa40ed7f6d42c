// The BMC simulator lives with the machine lab (cluster/bmc-sim.ts); tests import it from here.
export { IpmiSim, ipmiSimMissing, type IpmiSimMode, type IpmiSimOptions } from '../../cluster/bmc-sim.js';
