// README's settings table against the settings schema (src/config/settings.ts): every variable
// with its default, no variable the schema lacks, and the whole table as scripts/settings-table.ts
// renders it. Also the defaults docker/ relies on.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { BEGIN, END, README, REGENERATE, defaultCell, renderTable, settings, tableIn } from '../../scripts/settings-table.js'

const FIX = `README.md's settings table is out of step with src/config/settings.ts; regenerate it with \`${REGENERATE}\``

/** The README table's rows: the variables the first column names (in backticks) → the default column. */
function readmeRows (): Map<string, string> {
  const table = tableIn(readFileSync(README, 'utf8'))
  assert.ok(table !== null, `README.md has no ${BEGIN} … ${END} block. ${FIX}`)
  const rows = new Map<string, string>()
  for (const line of table.split('\n').slice(2)) {
    const cells = line.split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim())
    assert.equal(cells.length, 3, `not a three-column row: ${line}. ${FIX}`)
    for (const [, name] of (cells[0] as string).matchAll(/`([A-Z][A-Z0-9_]*)`/g)) rows.set(name as string, cells[1] as string)
  }
  return rows
}

describe('README settings table', () => {
  const rows = readmeRows()
  const all = settings()

  it('lists every variable of the schema with its default', () => {
    const problems: string[] = []
    for (const s of all) {
      const cell = rows.get(s.name)
      if (cell === undefined) problems.push(`${s.name} is missing`)
      else if (cell !== defaultCell(s)) problems.push(`${s.name}: default ${cell}, the schema says ${defaultCell(s)}`)
      if (s.fromFile === true && rows.get(`${s.name}_FILE`) === undefined) problems.push(`${s.name}_FILE is missing`)
    }
    assert.deepEqual(problems, [], FIX)
  })

  it('names no variable the schema lacks', () => {
    const known = new Set(all.flatMap((s) => s.fromFile === true ? [s.name, `${s.name}_FILE`] : [s.name]))
    assert.deepEqual([...rows.keys()].filter((name) => !known.has(name)), [], FIX)
  })

  it('is the table the script renders (meanings included)', () => {
    assert.equal(tableIn(readFileSync(README, 'utf8')), renderTable(), FIX)
  })

  it('documents every setting with a default or what unset means', () => {
    for (const s of all) {
      assert.ok(s.about.length > 0, `${s.name} has no meaning`)
      assert.ok((s.default === undefined) !== (s.unset === undefined), `${s.name}: one of default and unset`)
    }
  })
})

describe('docker/ against the schema', () => {
  it('the healthcheck falls back to the default PORT', () => {
    const port = settings().find((s) => s.name === 'PORT')?.default
    const fallback = /process\.env\.PORT \|\| '(\d+)'/.exec(readFileSync(new URL('../../docker/healthcheck.mjs', import.meta.url), 'utf8'))?.[1]
    assert.equal(fallback, port)
  })
})
