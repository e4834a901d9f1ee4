// Package clip shortens untrusted text before an error message echoes it,
// so that a hostile 10 MB value makes a short error, not a 10 MB one.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of the input that Quote and String keep.
const Max = 48

// String returns s unchanged when it is at most Max bytes long; otherwise
// its first Max bytes (cut back to a whole UTF-8 character) followed by "…".
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	cut := Max
	// Back up over at most UTFMax-1 continuation bytes: a character split
	// by the cut is dropped whole, and invalid input is cut where it is.
	for i := 1; i < utf8.UTFMax && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + "…"
}

// Quote is strconv.Quote of String(s): the value in Go quotes, clipped. The
// ellipsis that marks a clipped value stays outside the quotes, so a reader
// can tell a clipped value from one that really ends in "…".
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	c := String(s)
	return strconv.Quote(c[:len(c)-len("…")]) + "…"
}
