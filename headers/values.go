package headers

import (
	"net/http"
	"strings"
	"time"
)

// maxAhead bounds every delay, reset and window Parse reports. Anything
// further away is not a rate limit but a mistake.
const maxAhead = 366 * 24 * time.Hour

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// equalLower reports whether s equals lower, ignoring ASCII case. lower is
// a name of ours: lower-case letters, and only bytes below 0x40 ('-', the
// digits) besides.
func equalLower(s, lower string) bool {
	return len(s) == len(lower) && hasPrefixLower(s, lower)
}

// hasSuffixLower reports whether s ends with lower and has something
// before it, ignoring ASCII case; lower is as equalLower says.
func hasSuffixLower(s, lower string) bool {
	return len(s) > len(lower) && hasPrefixLower(s[len(s)-len(lower):], lower)
}

// hasPrefixLower reports whether s starts with lower, ignoring ASCII case;
// lower is as equalLower says. It compares words of four or eight bytes,
// the last one overlapping the one before it.
func hasPrefixLower(s, lower string) bool {
	n := len(lower)
	switch {
	case len(s) < n:
		return false
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if !foldMatch(load64(s[i:]), load64(lower[i:])) {
				return false
			}
		}
		return foldMatch(load64(s[n-8:]), load64(lower[n-8:]))
	case n >= 4:
		return foldMatch(load32(s), load32(lower)) && foldMatch(load32(s[n-4:]), load32(lower[n-4:]))
	}
	for i := range n {
		if !foldMatch(uint64(s[i]), uint64(lower[i])) {
			return false
		}
	}
	return true
}

// foldMatch reports whether the bytes of x match those of w, a word of a
// lower-case name, ignoring ASCII case: a byte of x matches when it equals
// w's after setting the 0x20 bit (the lower-case bit) wherever w has a
// letter. The bit 0x40 marks w's letters, and only the upper and the lower
// case of a letter become it.
func foldMatch(x, w uint64) bool {
	return x|(w&0x4040404040404040)>>1 == w
}

// load64 returns the first eight bytes of s as a little-endian word (the
// compiler makes it one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 returns the first four bytes of s as a little-endian word.
func load32(s string) uint64 {
	_ = s[3]
	return uint64(uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24)
}

// equalFold is strings.EqualFold for ASCII, which field names are (RFC 9110
// tokens); a non-ASCII byte only ever equals itself. It compares words of
// four or eight bytes, as hasPrefixLower does.
func equalFold(a, b string) bool {
	n := len(a)
	switch {
	case n != len(b):
		return false
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if !foldEqual(load64(a[i:]), load64(b[i:])) {
				return false
			}
		}
		return foldEqual(load64(a[n-8:]), load64(b[n-8:]))
	case n >= 4:
		return foldEqual(load32(a), load32(b)) && foldEqual(load32(a[n-4:]), load32(b[n-4:]))
	}
	for i := range n {
		if !foldEqual(uint64(a[i]), uint64(b[i])) {
			return false
		}
	}
	return true
}

// foldEqual reports whether the bytes of x and y are equal, ignoring ASCII
// case.
func foldEqual(x, y uint64) bool {
	return x == y || lower64(x) == lower64(y)
}

// lower64 returns the bytes of x with the ASCII capitals 'A' to 'Z' in
// lower case, and every other byte as it is.
func lower64(x uint64) uint64 {
	const ones = 0x0101010101010101
	// Below 0x80, adding 0x3f sets a byte's top bit from 'A' up and adding
	// 0x25 from '[' up, with no carry into the next byte.
	t := x &^ (0x80 * ones)
	upper := (t + 0x3f*ones) &^ (t + 0x25*ones) &^ x & (0x80 * ones)
	return x | upper>>2
}

// trim removes the optional whitespace HTTP allows around a value.
func trim(s string) string {
	if len(s) > 0 && s[0] > ' ' && s[len(s)-1] > ' ' {
		return s // the usual case, at the cost of one test for each end
	}
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseDec parses a non-negative decimal "digits [ . digits ]". It returns
// the whole part and the fraction in billionths (digits past the ninth are
// dropped). Signs, exponents, hex and anything else are refused, so
// ParseFloat's "Inf", "1e9" and "0x1p3" never reach the caller.
func parseDec(s string) (whole, frac int64, ok bool) {
	i := 0
	switch {
	case len(s) >= 8:
		if v, ok := eightDigits(load64(s)); ok {
			whole, i = int64(v), 8
		}
	case len(s) >= 4: // the first four after "0000"
		if v, ok := eightDigits(load32(s)<<32 | 0x30303030); ok {
			whole, i = int64(v), 4
		}
	}
	for ; i < len(s) && isDigit(s[i]); i++ {
		if i == 18 { // would overflow int64
			return 0, 0, false
		}
		whole = whole*10 + int64(s[i]-'0')
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(s) {
		return whole, 0, true
	}
	if s[i] != '.' || i+1 == len(s) {
		return 0, 0, false
	}
	scale := int64(1e8)
	for i++; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, 0, false
		}
		frac += int64(s[i]-'0') * scale
		scale /= 10
	}
	return whole, frac, true
}

// eightDigits returns the number the eight bytes of x (a word load64
// made) write in decimal, if they are all ASCII digits: all eight at once,
// for the long numbers of epoch resets and large limits.
func eightDigits(x uint64) (uint64, bool) {
	// A byte is a digit when its high nibble is 3 and adding 6 keeps it 3
	// (no byte can carry into the next without failing the first test).
	const ones = 0x0101010101010101
	if x&(0xf0*ones)|(x+0x06*ones)&(0xf0*ones)>>4 != 0x33*ones {
		return 0, false
	}
	x -= '0' * ones
	x = (x * (10<<8 + 1)) >> 8 & 0x00ff00ff00ff00ff    // pairs of digits, in 16 bits each
	x = (x * (100<<16 + 1)) >> 16 & 0x0000ffff0000ffff // fours, in 32 bits each
	return (x * (10000<<32 + 1)) >> 32, true           // all eight
}

// parseCount parses a count such as a limit or a remaining number. A
// fraction ("598.0", as Reddit sends) is truncated. It returns -1 when s is
// not a non-negative number.
func parseCount(s string) int64 {
	whole, _, ok := parseDec(trim(s))
	if !ok {
		return -1
	}
	return whole
}

// scaled turns whole+frac/1e9 units of unit into a Duration, refusing
// anything beyond maxAhead. unit is at most a second, so frac*unit fits.
func scaled(whole, frac int64, unit time.Duration) (time.Duration, bool) {
	if whole > int64(maxAhead/unit) {
		return 0, false
	}
	d := time.Duration(whole)*unit + time.Duration(frac*int64(unit)/1e9)
	if d > maxAhead {
		return 0, false
	}
	return d, true
}

// parseSeconds parses a delay in (possibly fractional) seconds.
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, ok := parseDec(trim(s))
	if !ok {
		return 0, false
	}
	return scaled(whole, frac, time.Second)
}

// parseMillis parses a delay in (possibly fractional) milliseconds.
func parseMillis(s string) (time.Duration, bool) {
	whole, frac, ok := parseDec(trim(s))
	if !ok {
		return 0, false
	}
	return scaled(whole, frac, time.Millisecond)
}

// parseRetryAfter parses a Retry-After value: delay-seconds or an HTTP-date.
// A date in the past means "now": zero, not negative.
func parseRetryAfter(s string, now time.Time) (time.Duration, bool) {
	s = trim(s)
	if d, ok := parseSeconds(s); ok {
		return d, true
	}
	t, ok := parseDate(s)
	if !ok {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	if d > maxAhead {
		return 0, false
	}
	return d, true
}

// parseReset parses a reset in any of the forms servers use: a number (by
// size: epoch milliseconds, epoch seconds or delta seconds), a Go duration
// ("6m0s"), an HTTP-date or an RFC 3339 time. Absolute times are returned
// in now's location.
func parseReset(s string, now time.Time) (time.Time, bool) {
	s = trim(s)
	if s == "" {
		return time.Time{}, false
	}
	whole, frac, ok := parseDec(s)
	if !ok {
		if d, ok := parseGoDuration(s); ok {
			return now.Add(d), true
		}
		t, ok := parseDate(s)
		if !ok || t.IsZero() || reach(t.Unix(), int64(t.Nanosecond()), now) > 0 {
			return time.Time{}, false
		}
		return t.In(now.Location()), true
	}
	// The numbers are compared with now as Unix seconds and nanoseconds;
	// a time.Time is built only for the answer.
	sec, nsec := whole, frac
	switch {
	case whole >= 1e12: // epoch milliseconds
		sec, nsec = epochMillis(whole, frac)
		if reach(sec, nsec, now) > 0 {
			return time.Time{}, false
		}
	case whole >= 1e9: // epoch seconds
		if reach(sec, nsec, now) > 0 {
			// Not seconds at all when read as such; if it is epoch
			// milliseconds of a clock that reads before 2001, say so.
			sec, nsec = epochMillis(whole, frac)
			if reach(sec, nsec, now) != 0 {
				return time.Time{}, false
			}
		}
	default: // delta seconds
		d, ok := scaled(whole, frac, time.Second)
		if ok && d <= maxAhead {
			return now.Add(d), true
		}
		// A delay of more than a year is no delay; it is epoch seconds
		// from a clock that reads before 2001-09-09 (a test's fake
		// clock, or a device's unset one) when it lands near now.
		if reach(sec, nsec, now) != 0 {
			return time.Time{}, false
		}
	}
	return time.Unix(sec, nsec).In(now.Location()), true
}

// epochMillis splits epoch milliseconds whole+frac/1e9 into Unix seconds
// and nanoseconds.
func epochMillis(whole, frac int64) (sec, nsec int64) {
	return whole / 1000, (whole%1000)*1e6 + frac/1e3
}

// reach compares the Unix time sec+nsec/1e9 (|sec| < 2^61, 0 ≤ nsec < 1e9)
// with now: it is 1 when that time is more than maxAhead after now, -1 when it
// is more than maxAhead before, and 0 otherwise. It answers what comparing
// time.Unix(sec, nsec).Sub(now) with ±maxAhead would, in integers.
func reach(sec, nsec int64, now time.Time) int {
	const most = int64(maxAhead / time.Second)
	var d time.Duration
	switch us := now.Unix(); {
	case us < -1<<62 || us > 1<<62:
		// A now hundreds of billions of years away, where Unix seconds
		// wrap: let Sub saturate.
		d = time.Unix(sec, nsec).Sub(now)
	case sec-us > most: // the nanoseconds differ by less than a second
		return 1
	case sec-us < -most:
		return -1
	default:
		d = time.Duration(sec-us)*time.Second + time.Duration(nsec-int64(now.Nanosecond()))
	}
	switch {
	case d > maxAhead:
		return 1
	case d < -maxAhead:
		return -1
	}
	return 0
}

// parseGoDuration parses OpenAI's resets, which are Go durations: "6m0s",
// "1s", "20ms", "1h2m3.5s". Negative and oversized values are refused.
func parseGoDuration(s string) (time.Duration, bool) {
	if s == "" || !(isDigit(s[0]) || s[0] == '.') || !isAlpha(s[len(s)-1]) {
		return 0, false
	}
	if d, ok, sure := wholeSecondsOrMillis(s); sure {
		return d, ok
	}
	// Refuse at once what time.ParseDuration would refuse because of a
	// byte no duration has (an RFC 3339 time's '-' and ':'): its error
	// costs two allocations. Bytes from 0x80 up may be µ or μ.
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c), c == '.', c >= 0x80,
			c == 'n', c == 'u', c == 'm', c == 's', c == 'h':
		default:
			return 0, false
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxAhead {
		return 0, false
	}
	return d, true
}

// wholeSecondsOrMillis reads the forms OpenAI sends most, a whole number
// of seconds or milliseconds ("2s", "120ms"), as time.ParseDuration would
// and then parseGoDuration's bounds: d and ok are its answer when sure is
// true. It is not sure of anything else.
func wholeSecondsOrMillis(s string) (d time.Duration, ok, sure bool) {
	n, unit := len(s)-1, time.Second
	if len(s) >= 2 && s[n] == 's' && s[n-1] == 'm' {
		n, unit = n-1, time.Millisecond
	}
	if s[len(s)-1] != 's' || n == 0 || n > 18 { // 18 digits cannot overflow
		return 0, false, false
	}
	var v int64
	for i := range n {
		if !isDigit(s[i]) {
			return 0, false, false
		}
		v = v*10 + int64(s[i]-'0')
	}
	d, ok = scaled(v, 0, unit)
	return d, ok, true
}

// rfc822Zones are the North American zones RFC 822 allows in a date. Go
// knows an abbreviation only if the location it parses in does, so these are
// applied by hand; any other unknown zone is taken as UTC.
var rfc822Zones = [...]struct {
	name   string
	offset int // seconds east of UTC
}{
	{"EST", -5 * 3600}, {"EDT", -4 * 3600},
	{"CST", -6 * 3600}, {"CDT", -5 * 3600},
	{"MST", -7 * 3600}, {"MDT", -6 * 3600},
	{"PST", -8 * 3600}, {"PDT", -7 * 3600},
}

// parseDate parses the dates servers put in rate-limit fields: the three
// HTTP-date forms, RFC 1123 with any zone (sloppy servers write "UTC" or a
// numeric offset instead of "GMT") and RFC 3339, with or without seconds
// (Jira sends "2024-01-02T15:04Z").
func parseDate(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	if isDigit(s[0]) {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, true
		}
		if t, err := time.Parse("2006-01-02T15:04Z07:00", s); err == nil {
			return t, true
		}
		return time.Time{}, false
	}
	if !isAlpha(s[0]) {
		return time.Time{}, false
	}
	if t, err := http.ParseTime(s); err == nil {
		return t, true
	}
	if t, err := time.ParseInLocation(time.RFC1123Z, s, time.UTC); err == nil {
		return t, true
	}
	t, err := time.ParseInLocation(time.RFC1123, s, time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	// In UTC, Go knows only "UTC"; every other abbreviation gets a
	// fabricated zero offset, which is wrong for the RFC 822 zones.
	name, _ := t.Zone()
	for _, z := range rfc822Zones[:] {
		if name == z.name {
			return t.Add(-time.Duration(z.offset) * time.Second).UTC(), true
		}
	}
	return t.UTC(), true
}

// members walks the members of the comma-separated lists in some field
// lines, one at a time, trimmed, skipping empty ones. A comma right after a
// weekday is taken as the one inside an HTTP-date ("Tue, 14 Jul 2020
// ..."), so a date stays one member. The zero value has no members.
type members struct {
	lines []string // the lines not yet begun
	line  string   // what is left of the current line
}

// next returns the next member, or "" when there are none left (a member
// is never empty). It is small enough to inline, so that asking an empty
// list costs no call.
func (l *members) next() string {
	if len(l.line)|len(l.lines) == 0 {
		return ""
	}
	return l.more()
}

// more is next, the part that walks the lines.
func (l *members) more() string {
	for {
		for l.line == "" {
			if len(l.lines) == 0 {
				return ""
			}
			l.line, l.lines = l.lines[0], l.lines[1:]
		}
		m := l.line
		i := strings.IndexByte(m, ',')
		switch {
		case i < 0:
			l.line = ""
		case isWeekday(trim(m[:i])):
			j := strings.IndexByte(m[i+1:], ',')
			if j < 0 {
				l.line = ""
			} else {
				m, l.line = m[:i+1+j], m[i+2+j:]
			}
		default:
			m, l.line = m[:i], m[i+1:]
		}
		if m = trim(m); m != "" {
			return m
		}
	}
}

// weekdays are the day names HTTP-dates start with, short and long.
var weekdays = [...]string{
	"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun",
	"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
}

// isWeekday reports whether s is a day name.
func isWeekday(s string) bool {
	if len(s) < 3 || !isAlpha(s[0]) {
		return false
	}
	for _, w := range weekdays[:] {
		if strings.EqualFold(s, w) {
			return true
		}
	}
	return false
}
