// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { importBoundaries } from './eslint/import-boundaries.js';
import { clockSeamFiles } from './eslint/clock-seam.js';
import { importBoundaryOptions } from './eslint/import-table.js';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      '.build-test-*/',
      'coverage/',
      // A session's working notes and experiments (.gitignore).
      '.scratch/',
      'src/gen/',
      'bin/*.js',
      // Loaded by node:test before tsx's hooks, or are the hooks: plain JavaScript.
      'test/support/file-times-reporter.mjs',
      'test/support/dist-loader.mjs',
      'test/support/dist-hooks.mjs',
      // Run by plain node after the tests, outside coverage (test/lanes.sh).
      'test/support/coverage-premerge.mjs',
      'eslint.config.js',
      'eslint/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'it', 'describe', 'suite', 'before', 'after'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true },
      ],
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
    },
  },
  {
    plugins: { slipway: { rules: { 'import-boundaries': importBoundaries } } },
    rules: {
      'slipway/import-boundaries': [
        'error',
        // The layering: eslint/import-table.js (docs/decisions/0026-layout-and-boundaries.md).
        importBoundaryOptions,
      ],
    },
  },
  {
    // Functions stay short enough to read at once: a longer one is split into named steps.
    // Tests are exempt (a test reads as one story).
    files: ['src/**/*.ts', 'lb/**/*.ts', 'bench/**/*.ts', 'cluster/**/*.ts'],
    rules: {
      'max-lines-per-function': [
        'error',
        { max: 100, skipBlankLines: true, skipComments: true, IIFEs: true },
      ],
    },
  },
  {
    // Protocol and consensus cores are pure: no I/O, clocks or randomness inside.
    files: [
      'src/raft/core/**/*.ts',
      'src/state/**/*.ts',
      'src/fleet/**/*.ts',
      'src/tinkerbell/**/*.ts',
      'src/boot/dhcp/codec*.ts',
      'src/boot/tftp/packet.ts',
      'src/boot/tftp/transfer.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: ['node:*', 'pino', '@grpc/*', 'level', 'classic-level'] },
      ],
      'no-restricted-globals': ['error', 'setTimeout', 'setInterval', 'setImmediate', 'performance'],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now' },
        { object: 'Math', property: 'random' },
      ],
    },
  },
  {
    // Time comes from the Clock passed in (eslint/clock-seam.js names the files).
    files: clockSeamFiles,
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: ['node:timers', 'node:timers/promises', 'timers', 'timers/promises'] },
      ],
      'no-restricted-globals': [
        'error',
        'setTimeout',
        'setInterval',
        'setImmediate',
        'clearTimeout',
        'clearInterval',
        'clearImmediate',
        'performance',
      ],
      'no-restricted-properties': ['error', { object: 'Date', property: 'now' }],
    },
  },
);
