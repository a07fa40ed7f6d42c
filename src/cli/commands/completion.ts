// `slipway completion bash|zsh|fish`: a script that completes slipway's commands and flags in the
// shell. The script asks `slipway __complete` for the words, so it follows every command and
// flag of the build installed, with nothing generated to keep in step.
import type { Command } from '@commander-js/extra-typings';
import { visibleCommands, type TreeCommand } from '../help.js';
import { UsageError } from '../output.js';

const scripts: Readonly<Record<string, string>> = {
  bash: `# slipway completion for bash: source <(slipway completion bash)
_slipway() {
  local IFS=$'\\n'
  COMPREPLY=($(slipway __complete -- "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _slipway slipway
`,
  zsh: `#compdef slipway
# slipway completion for zsh: slipway completion zsh > "\${fpath[1]}/_slipway"
_slipway() {
  local -a words_
  words_=(\${(f)"$(slipway __complete -- "\${(@)words[2,CURRENT]}" 2>/dev/null)"})
  compadd -- $words_
}
compdef _slipway slipway
`,
  fish: `# slipway completion for fish: slipway completion fish > ~/.config/fish/completions/slipway.fish
complete -c slipway -f -a '(slipway __complete -- (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`,
};

/** The words that may follow `words` (the last one being typed, possibly ""): commands or flags. */
export function completions(root: TreeCommand, words: readonly string[]): string[] {
  let command = root;
  const typed = words.at(-1) ?? '';
  const before = words.slice(0, -1);
  const takesValue = (c: TreeCommand, flag: string): boolean =>
    [c, root].some((x) =>
      x.options.some((o) => (o.long === flag || o.short === flag) && (o.required || o.optional)),
    );
  for (let i = 0; i < before.length; i++) {
    const w = before[i] ?? '';
    if (w.startsWith('-')) {
      if (!w.includes('=') && takesValue(command, w)) i++;
      continue;
    }
    const sub = command.commands.find((c) => c.name() === w || c.aliases().includes(w));
    if (sub !== undefined) command = sub;
  }
  const candidates = typed.startsWith('-')
    ? [...command.options, ...(command === root ? [] : root.options)].flatMap((o) =>
        o.hidden || o.long === undefined ? [] : [o.long],
      )
    : visibleCommands(command).map((c) => c.name());
  return [...new Set(candidates)].filter((c) => c.startsWith(typed)).sort();
}

export function completionCommand(program: Command, fullProgram: () => Promise<Command>): void {
  program
    .command('completion')
    .description('print a script that completes slipway commands and flags in bash, zsh or fish')
    .argument('<shell>', 'bash, zsh or fish')
    .action((shell) => {
      const script = scripts[shell];
      if (script === undefined)
        throw new UsageError(`completion: the shell must be bash, zsh or fish, got "${shell}"`);
      process.stdout.write(script);
    });
  program
    .command('__complete', { hidden: true })
    .description('the words that may come next (used by the completion scripts)')
    .argument('[words...]')
    .allowUnknownOption()
    .action(async (words) => {
      const root = await fullProgram();
      const list = completions(root as unknown as TreeCommand, words.length === 0 ? [''] : words);
      process.stdout.write(list.map((w) => `${w}\n`).join(''));
    });
}
