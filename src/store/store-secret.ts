/**
 * The key of the session records' MACs when the operator gives none
 * (STORE_SECRET / STORE_SECRET_FILE): generated once and kept in
 * `$DATA_DIR/store-secret` (mode 0600), so a restarted gateway still trusts
 * the records it wrote. Gateways sharing one Redis must share STORE_SECRET.
 */
import { randomBytes } from 'node:crypto'
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const STORE_SECRET_FILE = 'store-secret'
const MIN_LENGTH = 32

/** Reads the data dir's store secret, creating it first if there is none. */
export function loadStoreSecret (dataDir: string): string {
  const path = join(dataDir, STORE_SECRET_FILE)
  const existing = readSecret(path)
  if (existing !== null) return existing
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  // Written whole under a private name, then linked into place: a second
  // gateway starting at the same time sees either no file or the full one,
  // and link() fails with EEXIST instead of replacing the winner's.
  const temp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`
  writeFileSync(temp, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' })
  try {
    linkSync(temp, path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  } finally {
    unlinkSync(temp)
  }
  const secret = readSecret(path)
  if (secret === null) throw new Error(`${path} vanished while it was being created`)
  return secret
}

function readSecret (path: string): string | null {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
  const secret = text.replace(/\r?\n$/, '')
  if (secret.length < MIN_LENGTH) throw new Error(`${path} holds fewer than ${MIN_LENGTH} characters; set STORE_SECRET, or delete the file to have a new one generated (records signed with the old one are then refused)`)
  return secret
}
