/**
 * The value rules settings share (integers, durations, flags, comma lists,
 * secrets), so every group of settings reads its environment the same way:
 * a blank number is refused alike whichever setting it is.
 */
import { z } from 'zod'
import { list } from './values.js'

export const int = (min: number, max?: number) => {
  const n = z.coerce.number().int().min(min)
  // Number() reads blanks as 0 (PORT=" ": any port); as NaN they are refused instead.
  return z.preprocess((v) => typeof v === 'string' && v.trim() === '' ? NaN : v, max === undefined ? n : n.max(max))
}
/**
 * setTimeout's longest delay: Node fires a longer one after 1 ms (with a
 * TimeoutOverflowWarning), so "about a month" would mean "at once".
 */
export const MAX_TIMER_MS = 2 ** 31 - 1
/** A duration in ms that ends up as a timer's delay. */
export const ms = (min: number) => int(min, MAX_TIMER_MS)
export const flag = () => z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')
/** A comma list (an empty value is an empty list). */
export const commaList = () => z.string().transform(list)
/** A comma list whose every entry matches `entry`. */
export const listOf = (entry: RegExp, what: string) => commaList().refine((items) => items.every((x) => entry.test(x)), `expected a comma list of ${what}`)
export const secret = () => z.string().min(32, 'must be at least 32 characters')
