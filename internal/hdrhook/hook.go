// Package hdrhook lets the throttle Transport parse a response's rate-limit
// fields into a buffer of its own, with no allocation, without adding that
// variant to package headers' public API (whose Parse returns a slice the
// caller owns, and so allocates it).
//
// hdrhook cannot import headers (headers imports it), hence the type any.
package hdrhook

// ParseInto is set by package headers, when it is initialized, to a
//
//	func(dst []headers.Quota, h http.Header, now time.Time) headers.Info
//
// that does what headers.Parse does but appends the quotas to dst[:0]:
// the Info's Quotas share dst's array while it has room.
var ParseInto any
