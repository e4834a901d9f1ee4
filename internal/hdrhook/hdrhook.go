// Package hdrhook hands this module's own packages an entry point of
// package headers that is not public API: ParseInto, headers.Parse into a
// buffer of the caller's. Package headers sets it when it is initialized;
// this package cannot import headers (headers imports it), hence a
// variable of type any.
package hdrhook

// ParseInto is set by package headers, when it is initialized, to a
//
//	func(dst []headers.Quota, h http.Header, now time.Time) headers.Info
//
// that does what headers.Parse does, but appends the quotas to dst[:0]
// and returns that slice as Info.Quotas (nil when there are none), where
// Parse returns a slice of their own. When dst has room for every quota it
// allocates nothing, and the quotas share dst's array until the caller
// reuses it. Assert the type once, in a package-level variable.
//
// The call goes through a function value, so the compiler cannot see that
// dst stays put: a dst declared on the caller's stack is moved to the heap.
// Keep it in memory the caller has on the heap already.
var ParseInto any
