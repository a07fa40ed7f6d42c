// Power control's public entry, for code outside src/ (the BMC simulator of the lab).
export { IpmitoolDriver } from './ipmitool.js';
