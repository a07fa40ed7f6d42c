// A setting of `slipway server` that is wrong or cannot be read: the CLI exits 2 with its message.
// In a module of its own so the CLI can recognise one without loading the configuration schema.
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
