/**
 * A promise that rejects after `ms` unless `promise` settles first (its own
 * outcome then wins). The timer is cleared either way, so a pending check
 * never keeps the process alive.
 */
export function withTimeout<T> (promise: Promise<T>, ms: number, message = 'timeout'): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
