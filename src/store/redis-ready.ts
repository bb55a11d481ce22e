/**
 * Waiting (bounded) for a dedicated Redis connection to be ready before its
 * first command: a duplicate of the store's Cluster has no offline queue
 * (the store turns it off once the cluster answers, and `duplicate()` copies
 * that), so a command sent while it connects would fail. A lazy client
 * (`wait`) connects on its first command, and a closed one never will, so
 * neither is waited for. Shared by the feed's subscriber and the bus reader.
 */
import type { RedisClient } from './redis.js'

/**
 * Resolves once `client` is ready, after `waitMs` at most, or when the wake
 * function handed to `onWait` is called (its owner is closing).
 */
export async function whenReady (client: RedisClient, waitMs: number, onWait?: (wake: () => void) => void): Promise<void> {
  const status = client.status
  if (status === 'ready' || status === 'wait' || status === 'end' || status === 'close') return
  let timer: NodeJS.Timeout | undefined
  let done = (): void => {}
  try {
    await new Promise<void>((resolve) => {
      done = resolve
      onWait?.(resolve)
      client.once('ready', done)
      timer = setTimeout(resolve, waitMs)
    })
  } finally {
    clearTimeout(timer)
    client.off('ready', done)
  }
}
