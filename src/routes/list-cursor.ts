/**
 * The `cursor` of GET /v1/sessions as callers see it: the store's position
 * (created_at and id) behind a tag of the tenant it was handed to. The store
 * reads a position it cannot decode as "from the start", and any tenant's
 * position as a place in the caller's own list: a junk cursor (the text
 * `null` from a client's null next_cursor) or another tenant's would answer a
 * first or arbitrary page again, and a client following next_cursor would
 * loop. Here both are a 400 naming `cursor`.
 */
import { createHash } from 'node:crypto'
import { GatewayError } from '../errors.js'
import { decodeCursor } from '../store/store.js'

/** Not a secret: a cursor needs no more than to say whose listing it continues (forging one gains nothing). */
function tag (tenant: string): string {
  return createHash('sha256').update(`cgw list cursor\0${tenant}`).digest('base64url').slice(0, 12)
}

/** The cursor handed to `tenant` for the store's position `store` (null stays null). */
export function outgoingCursor (tenant: string, store: string | null): string | null {
  return store === null ? null : `${tag(tenant)}.${store}`
}

/** The store's position for a cursor `tenant` passed back; 400 `bad_request` for one it was not handed. */
export function incomingCursor (tenant: string, cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined
  const dot = cursor.indexOf('.')
  const store = cursor.slice(dot + 1)
  if (dot < 0 || cursor.slice(0, dot) !== tag(tenant) || decodeCursor(store) === null) {
    throw new GatewayError('bad_request', 'cursor: not a next_cursor of this caller\'s listing (omit it for the first page)')
  }
  return store
}
