/**
 * README's settings table, generated from the schema (src/config/settings.ts)
 * so the two cannot drift; test/unit/config-readme.test.ts fails when they
 * do. `npx tsx scripts/settings-table.ts` prints the table;
 * `npx tsx scripts/settings-table.ts --write` replaces it in README.md.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { type SettingDoc, settingDocs } from '../src/config/setting-docs.js'
import { envSchema } from '../src/config/settings.js'

export const README = fileURLToPath(new URL('../README.md', import.meta.url))
export const BEGIN = '<!-- settings-table: generated from src/config/settings.ts by `npx tsx scripts/settings-table.ts --write`; do not edit by hand -->'
export const END = '<!-- /settings-table -->'
export const REGENERATE = 'npx tsx scripts/settings-table.ts --write'

export interface Setting extends SettingDoc {
  name: string
}

/** Every variable of the schema with its documentation, in the schema's order. */
export function settings (): Setting[] {
  return Object.entries(envSchema.shape).map(([name, schema]) => {
    const doc = settingDocs.get(schema)
    if (doc === undefined) throw new Error(`${name} has no documentation in src/config/*-settings.ts`)
    return { name, ...doc }
  })
}

/** The default column: the value as the environment spells it, or what leaving it unset means. */
export function defaultCell (s: SettingDoc): string {
  if (s.default === undefined) return s.unset ?? '(none)'
  return s.default === '' ? '(none)' : `\`${s.default}\``
}

export function variableCell (s: Setting): string {
  return s.fromFile === true ? `\`${s.name}\` or \`${s.name}_FILE\`` : `\`${s.name}\``
}

export function renderTable (): string {
  const cell = (text: string): string => text.replaceAll('|', '\\|')
  const rows = settings().map((s) => `| ${cell(variableCell(s))} | ${cell(defaultCell(s))} | ${cell(s.about)} |`)
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n')
}

/** The table between the markers in `readme`; null when the markers are missing. */
export function tableIn (readme: string): string | null {
  const begin = readme.indexOf(BEGIN)
  const end = readme.indexOf(END)
  if (begin === -1 || end < begin) return null
  return readme.slice(begin + BEGIN.length, end).trim()
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const table = renderTable()
  if (process.argv.includes('--write')) {
    const readme = readFileSync(README, 'utf8')
    if (tableIn(readme) === null) throw new Error(`${README}: no ${BEGIN} … ${END} markers`)
    const begin = readme.indexOf(BEGIN) + BEGIN.length
    writeFileSync(README, `${readme.slice(0, begin)}\n${table}\n${readme.slice(readme.indexOf(END))}`)
  } else {
    process.stdout.write(`${table}\n`)
  }
}
