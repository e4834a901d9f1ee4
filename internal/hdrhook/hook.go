// Package hdrhook lets the throttle Transport parse a response's rate-limit
// fields into a buffer of its own, with no allocation, without adding that
// variant to package headers' public API (whose Parse returns a slice the
// caller owns, and so allocates it).
//
// hdrhook cannot import headers (headers imports it), hence the type any.
package hdrhook

// ParseInto is set by package headers, when it is initialized, to a
//
//	func(dst []headers.Quota, h http.Header, now time.Time) (headers.Info, string)
//
// that does what headers.Parse does but appends the quotas to dst[:0] (the
// Info's Quotas share dst's array while it has room), and returns too the
// bucket the fields name, read in the same walk over h: the first value of
// X-RateLimit-Resource (GitHub), else of X-RateLimit-Bucket (Discord),
// whatever the case of the names, trimmed; "" when neither has one.
var ParseInto any
