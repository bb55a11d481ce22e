// Fresh recordings (test/fixtures/recorded/claude-code-<version>/, made by
// `npm run record`) against the reference transcripts of the same CLI version
// (../shared/reference/claude-code-<version>/ next to the repo, or under
// CLAUDE_REFERENCE_ROOT; skipped, saying so, without them): the message
// type/subtype sequences must agree. Compared per direction (CLI→host and
// host→CLI), because how host writes interleave with CLI output depends on
// the recording driver's timing, not on the CLI.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { exitCodeOf, formatSequence, readSessionLog, sequenceTokens } from '../support/cli-driver.js'
import { referenceDir, referenceMissing } from '../support/reference.js'

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const RECORDED_ROOT = path.join(REPO_ROOT, 'test', 'fixtures', 'recorded')

/** recorded scenario ↔ reference scenario */
const PAIRS: Array<[string, string]> = [
  ['text', 'text'],
  ['allow', 'allow'],
  ['deny', 'deny'],
  ['interrupt_pending_permission', 'interrupt_pending_permission']
]

const versions = existsSync(RECORDED_ROOT)
  ? readdirSync(RECORDED_ROOT)
      .filter((d) => d.startsWith('claude-code-'))
      .sort()
  : []

test('recorded fixtures exist', () => {
  assert.ok(versions.length > 0, `no recordings under ${RECORDED_ROOT}: run npm run record`)
})

for (const version of versions) {
  const recordedDir = path.join(RECORDED_ROOT, version)
  const refDir = referenceDir(version)
  const missing = referenceMissing(refDir)

  for (const [recName, refName] of PAIRS) {
    test(`${version}: ${recName} matches reference ${refName}`, { skip: missing }, () => {
      const recFile = path.join(recordedDir, `${recName}.session.jsonl`)
      const refFile = path.join(refDir, `${refName}.session.jsonl`)
      assert.ok(existsSync(recFile), `missing recording ${recFile}: run npm run record -- ${recName}`)
      assert.ok(existsSync(refFile), `missing reference ${refFile}`)
      const rec = readSessionLog(recFile)
      const ref = readSessionLog(refFile)

      assert.equal(
        formatSequence(sequenceTokens(rec, 'stdout')),
        formatSequence(sequenceTokens(ref, 'stdout')),
        `CLI→host sequence of ${recName} differs from reference ${refName}`
      )
      assert.equal(
        formatSequence(sequenceTokens(rec, 'stdin')),
        formatSequence(sequenceTokens(ref, 'stdin')),
        `host→CLI sequence of ${recName} differs from reference ${refName}`
      )
      assert.equal(exitCodeOf(rec), exitCodeOf(ref), `exit code of ${recName}`)
    })
  }

  test(`${version}: transcripts are self-consistent and INDEX.md is current`, () => {
    const names = readdirSync(recordedDir)
      .filter((f) => f.endsWith('.session.jsonl'))
      .map((f) => f.slice(0, -'.session.jsonl'.length))
    assert.ok(names.length > 0, `no transcripts in ${recordedDir}`)
    const index = readFileSync(path.join(recordedDir, 'INDEX.md'), 'utf8')
    for (const name of names) {
      const log = readSessionLog(path.join(recordedDir, `${name}.session.jsonl`))
      // stdout.ndjson holds exactly the stdout lines of the session log.
      const stdout = readFileSync(path.join(recordedDir, `${name}.stdout.ndjson`), 'utf8')
      const stdoutLines = log.filter((e) => e.dir === 'stdout').map((e) => e.raw)
      assert.equal(stdout, stdoutLines.map((l) => `${l}\n`).join(''), `${name}.stdout.ndjson vs ${name}.session.jsonl`)
      const stdin = readFileSync(path.join(recordedDir, `${name}.stdin.ndjson`), 'utf8')
      assert.equal(stdin, log.filter((e) => e.dir === 'stdin').map((e) => `${e.raw}\n`).join(''), `${name}.stdin.ndjson vs ${name}.session.jsonl`)
      for (const line of stdoutLines) assert.doesNotThrow(() => JSON.parse(line), `${name}: non-JSON stdout line`)
      const row = `| ${name} | ${exitCodeOf(log)} | ${formatSequence(sequenceTokens(log))} |`
      assert.ok(index.includes(row), `INDEX.md lacks the row ${row}`)
      assert.ok(log.some((e) => e.dir === 'exit'), `${name}: no exit entry`)
      assert.ok(!log.some((e) => e.dir === 'driver' && e.raw.startsWith('CHECK FAILED')), `${name}: recorded with failed checks`)
    }
  })
}
