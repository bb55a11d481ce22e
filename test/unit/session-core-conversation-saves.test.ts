/**
 * Conversation saves are coalesced (one runs, one more follows if asked
 * meanwhile). A save asked the moment the running one has finished its last
 * round, before it is marked done (a promise settled in the same turn, as two
 * store replies read in one chunk are), must still run: it is typically the
 * save at the CLI's end, and the node that resumes the session would start
 * from a copy without the last turn. Real files: the "store" keeps what the
 * conversation file held when a save read it.
 */
import assert from 'node:assert/strict'
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import pino from 'pino'
import { ConversationSaves } from '../../src/session/conversation-saves.js'

describe('session core: conversation saves', () => {
  it('a save asked as the running one ends is not lost: the stored copy has the last turn', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-conv-saves-'))
    const file = join(dir, 'conversation.jsonl')
    const stored = join(dir, 'stored.jsonl')
    writeFileSync(file, '{"turn":1}\n')
    let lastSave: Promise<void> = Promise.resolve()
    const saves = new ConversationSaves({
      conversation: {
        save: (): Promise<void> => (lastSave = writeFile(stored, readFileSync(file))),
        restore: async () => {},
        watch: () => null
      },
      lease: () => ({ sessionId: 's', node: 'n', epoch: 1 }),
      onFenced: () => {},
      cliRunning: () => false,
      log: pino({ level: 'silent' })
    })
    const first = saves.save()
    let last: Promise<void> = Promise.resolve()
    // Settled with the running save's write: the CLI's last turn is in its file, and the save at its end is asked.
    await lastSave.then(() => {
      appendFileSync(file, '{"turn":2}\n')
      last = saves.save()
    })
    await first
    await last
    assert.equal(readFileSync(stored, 'utf8'), '{"turn":1}\n{"turn":2}\n', 'the save asked last stored the file as it was then')
  })
})
