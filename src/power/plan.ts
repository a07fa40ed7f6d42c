// What each operator request does, as idempotent steps (model.ts PowerStep). A cycle is off
// then on rather than IPMI's own "power cycle": each half can be repeated safely by a new
// leader, and on a machine that is off it simply powers it on. Netboot sets the next boot to
// PXE first, then cycles, so the machine boots from the network whether it was on or off.
import type { PowerOp, PowerStep } from '../state/control/model.js';

export function powerSteps(op: PowerOp): readonly PowerStep[] {
  switch (op) {
    case 'on':
      return ['on'];
    case 'off':
      return ['off'];
    case 'cycle':
      return ['off', 'on'];
    case 'status':
      return ['status'];
    case 'netboot':
      return ['bootdev-pxe', 'off', 'on'];
  }
}

/** Attempts per step: a BMC that drops a UDP exchange or is busy usually answers the next try. */
export const powerAttemptsDefault = 3;
