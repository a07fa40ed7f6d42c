// One power step carried out on a BMC, idempotently: on and off look first and act only when
// the machine is not already there, then wait until the BMC reports the new state. So a step
// repeated by a new leader (the old one may or may not have done it) has the effect of one,
// and a BMC that rejects "power on" while on (some do) is never asked.
import type { PowerState, PowerStep } from '../model/records.js';
import type { BmcTarget, PowerDriver } from './ipmitool.js';
import { PowerDriverError } from './ipmitool.js';
import { sleep, type Clock } from '../platform/clock.js';

export interface StepOutcome {
  readonly powerState?: PowerState;
  readonly message: string;
}

export interface StepOptions {
  /** The machine boots with UEFI: boot-device changes ask for the EFI path. */
  readonly uefi: boolean;
  /** How long a power change may take to show in the BMC's status (a graceful off can take a while). */
  readonly settleMs?: number;
  readonly pollMs?: number;
  /** The settle wait's clock (src/platform/clock.ts). */
  readonly clock: Clock;
}

const settleMsDefault = 60_000;
const pollMsDefault = 500;

export async function runPowerStep(
  driver: PowerDriver,
  target: BmcTarget,
  step: PowerStep,
  options: StepOptions,
): Promise<StepOutcome> {
  switch (step) {
    case 'status': {
      const powerState = await driver.status(target);
      return { powerState, message: `power is ${powerState}` };
    }
    case 'on':
    case 'off': {
      const before = await driver.status(target);
      if (before === step) return { powerState: before, message: `power was already ${step}` };
      if (step === 'on') await driver.powerOn(target);
      else await driver.powerOff(target);
      await settle(driver, target, step, options);
      return { powerState: step, message: `power ${step}` };
    }
    case 'bootdev-pxe':
    case 'bootdev-disk': {
      const device = step === 'bootdev-pxe' ? 'pxe' : 'disk';
      await driver.bootDevice(target, device, options.uefi);
      return { message: `next boot from ${device}${options.uefi ? ' (UEFI)' : ''}` };
    }
  }
}

/** Waits until the BMC reports `want`; a step that never gets there fails (and is retried). */
async function settle(
  driver: PowerDriver,
  target: BmcTarget,
  want: PowerState,
  options: StepOptions,
): Promise<void> {
  const settleMs = options.settleMs ?? settleMsDefault;
  const { clock } = options;
  const deadline = clock.now() + settleMs;
  for (;;) {
    if ((await driver.status(target)) === want) return;
    if (clock.now() >= deadline) {
      throw new PowerDriverError(
        'other',
        `the BMC accepted power ${want} but still reported the opposite after ${String(settleMs)} ms`,
      );
    }
    await sleep(clock, options.pollMs ?? pollMsDefault);
  }
}
